import { useState, type FormEvent } from 'react';
import { api, ApiError, describe } from '../lib/api';
import { can } from '../lib/session';
import { useApi } from '../lib/useApi';
import { ErrorText, Field, Loading } from '../components/ui';

interface Translator {
  _id: string;
  name: string;
  version: string;
  description: string;
  match: { deviceModelName?: string };
  spec: Record<string, unknown>;
  createdAt: string;
}

const EXAMPLE_SPEC = '{\n  "temperature": { "type": "number", "unit": "°C", "quantity": "temperature" }\n}';
const EXAMPLE_CODE = 'function translate({ encodedData }) {\n  const b = Buffer.from(encodedData.hexEncoded, "hex");\n  return { result: { temperature: b.readInt16BE(0) / 10 } };\n}';

/** Translators: every version grouped by name, the devices each version runs on, and an upload form. */
export default function Translators() {
  const { data, error, reload } = useApi<Translator[]>('/api/translators', 'Listing translators');
  const [open, setOpen] = useState<string | null>(null);
  const groups = new Map<string, Translator[]>();
  for (const t of data ?? []) groups.set(t.name, [...(groups.get(t.name) ?? []), t]);
  return (
    <section aria-labelledby="tr-title">
      <h1 id="tr-title">Translators</h1>
      <ErrorText>{error}</ErrorText>
      {!data && !error && <Loading />}
      {data && data.length === 0 && <p className="muted">No translator is uploaded yet.</p>}
      <ul className="plain-list" aria-label="Translators">
        {[...groups].map(([name, versions]) => (
          <li key={name}>
            <strong>{name}</strong> <span className="muted">{versions[0]!.description.split('\n')[0]}</span>
            <ul aria-label={`Versions of ${name}`}>
              {versions.map((v) => (
                <li key={v._id}>
                  <button type="button" className="small" aria-expanded={open === v._id} onClick={() => setOpen(open === v._id ? null : v._id)}>
                    {v.version}
                  </button>{' '}
                  <span className="muted small">
                    {Object.keys(v.spec).join(', ')}
                    {v.match.deviceModelName ? ` · model ${v.match.deviceModelName}` : ''}
                  </span>
                  {open === v._id && <UsedBy id={v._id} onDeleted={reload} />}
                </li>
              ))}
            </ul>
          </li>
        ))}
      </ul>
      {can('translator', 'POST') && <Upload onUploaded={reload} />}
    </section>
  );
}

function UsedBy({ id, onDeleted }: { id: string; onDeleted: () => void }) {
  const { data, error } = useApi<{ _id: string; name: string }[]>(`/api/translators/${id}/devices`, 'Finding the devices that use it');
  const [actionError, setActionError] = useState<string | null>(null);
  const remove = async () => {
    try {
      await api('DELETE', `/api/translators/${id}`);
      onDeleted();
    } catch (e) {
      setActionError(describe(e, 'Deleting the version'));
    }
  };
  return (
    <div className="card small">
      <ErrorText>{error ?? actionError}</ErrorText>
      {data && (data.length === 0 ? <p className="muted">No device runs this version.</p> : <p>Runs on: {data.map((d) => d.name).join(', ')}</p>)}
      {can('translator', 'DELETE') && (
        <button type="button" className="small danger" onClick={() => void remove()}>
          Delete this version
        </button>
      )}
    </div>
  );
}

/** The request fields the upload form has an input for (`match` is the device model name's). */
const FORM_FIELDS = new Set(['name', 'version', 'match', 'description', 'spec', 'code']);

function Upload({ onUploaded }: { onUploaded: () => void }) {
  const [form, setForm] = useState({ name: '', version: '1.0.0', description: '', deviceModelName: '', spec: EXAMPLE_SPEC, code: EXAMPLE_CODE });
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const set = (k: keyof typeof form) => (e: { target: { value: string } }) => setForm({ ...form, [k]: e.target.value });
  const fromFile = async (file: File | undefined) => {
    if (!file) return;
    try {
      const t = JSON.parse(await file.text()) as Record<string, any>;
      setForm({ name: t.name ?? '', version: t.version ?? '', description: t.description ?? '', deviceModelName: t.match?.deviceModelName ?? '', spec: JSON.stringify(t.spec ?? {}, null, 2), code: t.code ?? '' });
    } catch {
      setError('The file is not a translator in JSON.');
    }
  };
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setErrors({});
    setError(null);
    setDone(null);
    let spec: unknown;
    try {
      spec = JSON.parse(form.spec);
    } catch {
      return setErrors({ spec: 'spec is not JSON' });
    }
    const body: Record<string, unknown> = { name: form.name, version: form.version, spec, code: form.code };
    if (form.description) body.description = form.description;
    if (form.deviceModelName) body.match = { deviceModelName: form.deviceModelName };
    try {
      const t = await api<Translator>('POST', '/api/translators', { body });
      setDone(`Uploaded ${t.name} ${t.version}.`);
      onUploaded();
    } catch (err) {
      // Each problem beside the field of the form it names (`spec.temperature` beside the spec); the rest above the button.
      const problems = err instanceof ApiError && err.status === 422 ? err.problems : [];
      if (!problems.length) return setError(describe(err, 'Uploading'));
      const byField: Record<string, string> = {};
      const elsewhere: string[] = [];
      for (const p of problems) {
        const key = p.field.split(/[.[]/)[0]!;
        const text = `${p.field} ${p.problem}`;
        if (FORM_FIELDS.has(key)) byField[key] = byField[key] ? `${byField[key]}; ${text}` : text;
        else elsewhere.push(text);
      }
      setErrors(byField);
      if (elsewhere.length) setError(elsewhere.join('; '));
    }
  };
  const input = (k: keyof typeof form, label: string, hint?: string) => (
    <Field label={label} error={errors[k === 'deviceModelName' ? 'match' : k]} hint={hint}>
      {(id, d) => <input id={id} value={form[k]} onChange={set(k)} aria-describedby={d} aria-invalid={!!errors[k === 'deviceModelName' ? 'match' : k]} />}
    </Field>
  );
  return (
    <form className="card" onSubmit={submit} aria-labelledby="upload-title">
      <h2 id="upload-title">Upload a version</h2>
      <div className="field">
        <label htmlFor="tr-file">From a file (the translator as JSON)</label>
        <input id="tr-file" type="file" accept="application/json,.json" onChange={(e) => void fromFile(e.target.files?.[0])} />
      </div>
      {input('name', 'Name', 'Lowercase words joined by dashes, such as acme-climate-th.')}
      {input('version', 'Version', 'A semantic version; a data-model change needs a new major version.')}
      {input('deviceModelName', 'Device model name', 'Devices with this model name use it (optional).')}
      <Field label="Description" error={errors.description}>
        {(id, d) => <textarea id={id} rows={3} value={form.description} onChange={set('description')} aria-describedby={d} />}
      </Field>
      <Field label="Spec (JSON)" error={errors.spec}>
        {(id, d) => <textarea id={id} rows={5} value={form.spec} onChange={set('spec')} aria-describedby={d} aria-invalid={!!errors.spec} />}
      </Field>
      <Field label="Code" error={errors.code}>
        {(id, d) => <textarea id={id} rows={8} value={form.code} onChange={set('code')} aria-describedby={d} aria-invalid={!!errors.code} />}
      </Field>
      <ErrorText>{error}</ErrorText>
      {done && (
        <p className="ok" role="status">
          {done}
        </p>
      )}
      <button type="submit" className="primary">
        Upload
      </button>
    </form>
  );
}

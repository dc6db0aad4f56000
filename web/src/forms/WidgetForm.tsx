import { useEffect, useState } from 'react';
import type { ErrorSchema } from '@rjsf/utils';
import { api, ApiError, describe } from '../lib/api';
import { offers, openapi, settingsSchemaName, standalone, templateNames, type OpenApiDoc } from '../lib/openapi';
import { ErrorText, Loading, Modal } from '../components/ui';
import { TEMPLATE_LABELS } from '../widgets';
import type { Widget } from '../pages/Dashboard';
import { apiErrors, errorAt, initialValue, SchemaForm, useChoices } from './SchemaForm';

/**
 * Adding a widget, or editing one's settings, with the form of its template's
 * settings schema (`<Template>Settings` in the OpenAPI document). A broken
 * widget opens with its stored settings and the failing setting marked.
 */
export default function WidgetForm({ dashboardId, widget, onClose, onSaved, onGone }: { dashboardId: string; widget?: Widget; onClose: () => void; onSaved: () => void; onGone: () => void }) {
  const [doc, setDoc] = useState<OpenApiDoc | null>(null);
  const [template, setTemplate] = useState<string>(widget?.template ?? '');
  const [data, setData] = useState<unknown>(widget?.settings);
  const [extra, setExtra] = useState<ErrorSchema | undefined>(() => (widget?._broken && widget.error ? errorAt(widget.error.split(' ')[0]!, widget.error.split(' ').slice(1).join(' '), 'settings.') : undefined));
  const [error, setError] = useState<string | null>(widget?._broken ? `Stored settings fail today's rules: ${widget.error}` : null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    openapi().then(setDoc, (e) => setError(describe(e, 'Reading the widget schemas')));
  }, []);
  const choices = useChoices(!!doc && offers(doc, '/api/rules-v2', 'get'));
  const schema = doc && template ? standalone(doc, settingsSchemaName(template)) : null;
  useEffect(() => {
    if (!widget && schema && choices) setData(initialValue(schema, schema, choices));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [template, !!choices, !!doc]);

  const save = async (settings: unknown) => {
    setBusy(true);
    setError(null);
    setExtra(undefined);
    try {
      if (widget) await api('PUT', `/api/dashboards/${dashboardId}/widgets/${widget._id}`, { body: { template, settings } });
      else await api('POST', `/api/dashboards/${dashboardId}/widgets`, { body: { template, settings } });
      onSaved();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        if (/widget/i.test(e.message)) setError('This widget was deleted meanwhile.');
        else onGone();
        return;
      }
      const mapped = apiErrors(e, 'settings.');
      setExtra(mapped.extra);
      setError(mapped.message ?? describe(e, 'Saving the widget'));
    } finally {
      setBusy(false);
    }
  };

  const title = widget ? `${TEMPLATE_LABELS[widget.template] ?? widget.template} settings` : 'Add a widget';
  return (
    <Modal title={title} onClose={onClose} wide>
      {!doc && !error && <Loading what="Reading the widget schemas" />}
      {doc && !widget && (
        <div className="field">
          <label htmlFor="widget-template">Widget type</label>
          <select id="widget-template" value={template} onChange={(e) => (setTemplate(e.target.value), setExtra(undefined), setError(null))} autoFocus>
            <option value="">Choose…</option>
            {templateNames(doc).map((t) => (
              <option key={t} value={t}>
                {TEMPLATE_LABELS[t] ?? t}
              </option>
            ))}
          </select>
        </div>
      )}
      {schema?.description && <p className="muted small">{schema.description}</p>}
      <ErrorText>{error}</ErrorText>
      {schema && (choices || widget) ? (
        <SchemaForm schema={schema} formData={data} onChange={(d) => (setData(d), extra && setExtra(undefined))} onSubmit={(d) => void save(d)} extraErrors={extra} choices={choices} idPrefix="settings">
          <div className="row sticky-actions">
            <button type="submit" className="primary" disabled={busy}>
              {busy ? 'Saving…' : widget ? 'Save' : 'Add to dashboard'}
            </button>
            <button type="button" onClick={onClose}>
              Cancel
            </button>
          </div>
        </SchemaForm>
      ) : (
        template && !error && <Loading what="Preparing the form" />
      )}
    </Modal>
  );
}

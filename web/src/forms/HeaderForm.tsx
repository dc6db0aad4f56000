import { useEffect, useState } from 'react';
import type { ErrorSchema } from '@rjsf/utils';
import { ApiError, describe } from '../lib/api';
import { openapi, type Schema } from '../lib/openapi';
import { ErrorText, Loading, Modal } from '../components/ui';
import type { Dashboard } from '../pages/Dashboard';
import { apiErrors, SchemaForm } from './SchemaForm';

interface HeaderData {
  name?: string;
  title?: string;
  description?: string;
  headerSettings?: Record<string, unknown>;
}

/**
 * The PATCH body of the form's data. The form gives an emptied field as
 * undefined, which a PATCH would leave out, keeping the stored value; it is
 * sent as the document's empty value instead: an empty title or description
 * clears it, and `headerSettings` replaces the stored settings as a whole, so
 * `{}` clears them all. An emptied name goes as empty too, and the API's
 * refusal shows beside it (a dashboard keeps a name).
 */
export function headerPatch(data: HeaderData): Required<HeaderData> {
  return { name: data.name ?? '', title: data.title ?? '', description: data.description ?? '', headerSettings: data.headerSettings ?? {} };
}

/**
 * Name, title, description and header settings: the `DashboardPatch` schema without the layout. `patch` sends it
 * against the revision the page shows; a 412 (someone else changed the dashboard) goes to `onConflict`.
 */
export default function HeaderForm({ dashboard, patch, onClose, onSaved, onGone, onConflict }: { dashboard: Dashboard; patch: (body: unknown) => Promise<unknown>; onClose: () => void; onSaved: () => void; onGone: () => void; onConflict: () => void }) {
  const [schema, setSchema] = useState<Schema | null>(null);
  const [data, setData] = useState<unknown>({ name: dashboard.name, title: dashboard.title, description: dashboard.description, headerSettings: dashboard.headerSettings ?? {} });
  const [extra, setExtra] = useState<ErrorSchema>();
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    openapi().then(
      (d) => {
        const patch = d.components.schemas.DashboardPatch!;
        const { widgets: _, ...properties } = patch.properties as Record<string, Schema>;
        setSchema({ ...patch, properties, components: d.components });
      },
      (e) => setError(describe(e, 'Reading the schema')),
    );
  }, []);
  const save = async (body: unknown) => {
    setError(null);
    setExtra(undefined);
    try {
      await patch(headerPatch(body as HeaderData));
      onSaved();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return onGone();
      if (e instanceof ApiError && e.status === 412) return onConflict();
      const mapped = apiErrors(e);
      setExtra(mapped.extra);
      setError(mapped.message ?? describe(e, 'Saving'));
    }
  };
  return (
    <Modal title="Name and header" onClose={onClose} wide>
      <ErrorText>{error}</ErrorText>
      {!schema ? (
        !error && <Loading />
      ) : (
        <SchemaForm schema={schema} formData={data} onChange={setData} onSubmit={(d) => void save(d)} extraErrors={extra} idPrefix="dashboard">
          <div className="row">
            <button type="submit" className="primary">
              Save
            </button>
            <button type="button" onClick={onClose}>
              Cancel
            </button>
          </div>
        </SchemaForm>
      )}
    </Modal>
  );
}

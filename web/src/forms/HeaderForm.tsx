import { useEffect, useState } from 'react';
import type { ErrorSchema } from '@rjsf/utils';
import { api, ApiError, describe } from '../lib/api';
import { openapi, type Schema } from '../lib/openapi';
import { ErrorText, Loading, Modal } from '../components/ui';
import type { Dashboard } from '../pages/Dashboard';
import { apiErrors, SchemaForm } from './SchemaForm';

/** Name, title, description and header settings: the `DashboardPatch` schema without the layout. */
export default function HeaderForm({ dashboard, onClose, onSaved, onGone }: { dashboard: Dashboard; onClose: () => void; onSaved: () => void; onGone: () => void }) {
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
      await api('PATCH', `/api/dashboards/${dashboard._id}`, { body });
      onSaved();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return onGone();
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

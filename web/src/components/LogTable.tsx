/** A log entry as `GET /api/logs` lists it. */
export interface LogEntry {
  _id: string;
  resourceId: string;
  resourceType: string;
  type: string;
  priority: string;
  category: string;
  message: string;
  time: string;
}

/** Log entries newest first, as the device page and the `logs` widget show them; `tinted` colours rows by type. */
export function LogTable({ logs, tinted = false }: { logs: LogEntry[]; tinted?: boolean }) {
  if (logs.length === 0) return <p className="muted">No entries.</p>;
  return (
    <table className="table small">
      <thead>
        <tr>
          <th scope="col">Time</th>
          <th scope="col">Type</th>
          <th scope="col">Message</th>
        </tr>
      </thead>
      <tbody>
        {logs.map((l) => (
          <tr key={l._id} className={tinted ? `log-${l.type}` : undefined}>
            <td>{new Date(l.time).toLocaleString()}</td>
            <td>
              {l.type} · {l.priority} · {l.category}
            </td>
            <td>{l.message}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

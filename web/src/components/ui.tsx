import { Component, useEffect, useRef, type ReactNode } from 'react';

/** An error in words, announced to screen readers. */
export function ErrorText({ children, id }: { children: ReactNode; id?: string }) {
  if (!children) return null;
  return (
    <p className="error" role="alert" id={id}>
      {children}
    </p>
  );
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p className="muted" role="status" aria-live="polite">
      {what}…
    </p>
  );
}

/** A modal dialog (the native `<dialog>`: focus is trapped and Escape closes it). */
export function Modal({ title, onClose, children, wide }: { title: string; onClose: () => void; children: ReactNode; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current!;
    if (!d.open) d.showModal();
    return () => d.close();
  }, []);
  return (
    <dialog ref={ref} className={wide ? 'modal wide' : 'modal'} aria-labelledby="modal-title" onCancel={(e) => (e.preventDefault(), onClose())}>
      <header className="modal-head">
        <h2 id="modal-title">{title}</h2>
        <button type="button" className="plain" aria-label="Close" onClick={onClose}>
          ×
        </button>
      </header>
      {children}
    </dialog>
  );
}

/** Keeps a rendering failure in one part of the page from blanking the rest. */
export class Boundary extends Component<{ children: ReactNode; what: string; resetKey?: unknown }, { error: Error | null; key: unknown }> {
  state = { error: null as Error | null, key: this.props.resetKey };
  static getDerivedStateFromProps(props: { resetKey?: unknown }, state: { key: unknown; error: Error | null }) {
    return props.resetKey !== state.key ? { error: null, key: props.resetKey } : null;
  }
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  componentDidCatch(error: Error) {
    // Shown in place; kept out of the console's uncaught errors.
    void error;
  }
  render() {
    if (this.state.error) return <ErrorText>{`${this.props.what} could not be shown: ${this.state.error.message}`}</ErrorText>;
    return this.props.children;
  }
}

/** A labelled input whose API validation message is shown next to it. */
export function Field({ label, error, children, hint }: { label: string; error?: string | null; children: (id: string, describedBy?: string) => ReactNode; hint?: string }) {
  const id = `f-${label.replace(/\W+/g, '-').toLowerCase()}`;
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children(id, error ? `${id}-error` : hint ? `${id}-hint` : undefined)}
      {hint && !error && (
        <small id={`${id}-hint`} className="muted">
          {hint}
        </small>
      )}
      {error && (
        <small id={`${id}-error`} className="error" role="alert">
          {error}
        </small>
      )}
    </div>
  );
}

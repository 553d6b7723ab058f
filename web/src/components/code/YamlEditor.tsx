// The YAML view (CodeMirror 6): syntax highlighting, server errors at their
// lines, and a guard that refuses a paste over the document limit instead
// of freezing the tab. Loaded on demand (React.lazy).
import { yaml } from '@codemirror/lang-yaml';
import { lintGutter, setDiagnostics, type Diagnostic } from '@codemirror/lint';
import { EditorState } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { basicSetup } from 'codemirror';
import { useEffect, useRef } from 'react';

export type LineError = { line: number; message: string };

type Props = {
  value: string;
  onChange?: (v: string) => void;
  readOnly?: boolean;
  errors?: LineError[];
  label: string;
  maxBytes?: number;
  onRefused?: (message: string) => void;
  height?: string;
};

function diagnostics(state: EditorState, errors: LineError[]): Diagnostic[] {
  return errors
    .filter((e) => e.line >= 1 && e.line <= state.doc.lines)
    .map((e) => {
      const l = state.doc.line(e.line);
      return { from: l.from, to: l.to, severity: 'error', message: e.message };
    });
}

export default function YamlEditor({ value, onChange, readOnly, errors = [], label, maxBytes, onRefused, height = '60vh' }: Props) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const cb = useRef({ onChange, onRefused });
  useEffect(() => {
    cb.current = { onChange, onRefused };
  });

  useEffect(() => {
    const guard = EditorState.transactionFilter.of((tr) => {
      if (maxBytes && tr.docChanged && tr.newDoc.length > maxBytes) {
        cb.current.onRefused?.(`That would make the YAML ${(tr.newDoc.length / (1 << 20)).toFixed(1)} MB; the limit is ${Math.floor(maxBytes / (1 << 20))} MB. Nothing was inserted.`);
        return [];
      }
      return tr;
    });
    const v = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: value,
        extensions: [
          basicSetup,
          yaml(),
          lintGutter(),
          guard,
          EditorState.readOnly.of(!!readOnly),
          EditorView.contentAttributes.of({ 'aria-label': label }),
          EditorView.theme({ '&': { height }, '.cm-scroller': { overflow: 'auto' } }),
          EditorView.updateListener.of((u) => {
            if (u.docChanged) cb.current.onChange?.(u.state.doc.toString());
          }),
        ],
      }),
    });
    view.current = v;
    return () => v.destroy();
    // The editor is made once; value changes from outside are applied below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [readOnly, label]);

  useEffect(() => {
    const v = view.current;
    if (v && v.state.doc.toString() !== value) {
      v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
    }
  }, [value]);

  useEffect(() => {
    const v = view.current;
    if (v) v.dispatch(setDiagnostics(v.state, diagnostics(v.state, errors)));
  }, [errors, value]);

  return <div ref={host} data-testid="yaml-editor" />;
}

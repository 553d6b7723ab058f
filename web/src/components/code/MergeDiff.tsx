// Side-by-side diff of two YAML documents (CodeMirror merge view), unchanged
// sections collapsed. Loaded on demand (React.lazy).
import { yaml } from '@codemirror/lang-yaml';
import { MergeView } from '@codemirror/merge';
import { EditorState } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { basicSetup } from 'codemirror';
import { useLayoutEffect, useRef } from 'react';
import { lineDiff } from './lineDiff';

export default function MergeDiff({ a, b, label }: { a: string; b: string; label: string }) {
  const host = useRef<HTMLDivElement>(null);
  // A layout effect: the view is built in the same task as the page's commit,
  // so the page is never painted (or inspected) with an empty region.
  useLayoutEffect(() => {
    const ro = [basicSetup, yaml(), EditorState.readOnly.of(true), EditorView.editable.of(false)];
    const mv = new MergeView({
      parent: host.current!,
      a: { doc: a, extensions: [...ro, EditorView.contentAttributes.of({ 'aria-label': `${label}: before` })] },
      b: { doc: b, extensions: [...ro, EditorView.contentAttributes.of({ 'aria-label': `${label}: after` })] },
      collapseUnchanged: { margin: 3, minSize: 6 },
      gutter: true,
      diffConfig: { override: lineDiff },
    });
    return () => mv.destroy();
  }, [a, b, label]);
  return <div ref={host} role="region" aria-label={label} />;
}

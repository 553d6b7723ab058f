import { Alert, Center, Loader } from '@mantine/core';
import { useEffect, useState, type ComponentProps } from 'react';
import type MergeDiffView from './MergeDiff';
import type YamlEditorView from './YamlEditor';

// CodeMirror is its own chunk, loaded on first use. Not React.lazy with
// Suspense: React holds a suspended boundary's content back for up to 300 ms
// after the module arrives (its fallback throttle), which was a third of the
// 10,000-rule diff page's time. A loaded module renders at once; one still
// loading renders when it arrives.

type Chunk<C> = { get: () => C | undefined; load: () => Promise<C> };

/** chunk is a module's default export, loaded once. */
function chunk<C>(load: () => Promise<{ default: C }>): Chunk<C> {
  let mod: C | undefined;
  let pending: Promise<C> | undefined;
  return {
    get: () => mod,
    load: () => (pending ??= load().then((m) => (mod = m.default))),
  };
}

const yamlChunk = chunk(() => import('./YamlEditor'));
const mergeChunk = chunk(() => import('./MergeDiff'));

/** preloadEditor starts loading CodeMirror while a page fetches its data. */
export function preloadEditor(kind: 'yaml' | 'merge') {
  void (kind === 'yaml' ? yamlChunk : mergeChunk).load().catch(() => {});
}

/** useChunk is the chunk's component once loaded, and the load's error if it failed. */
function useChunk<C>(c: Chunk<C>): { Component?: C; error?: unknown } {
  const [state, setState] = useState<{ Component?: C; error?: unknown }>(() => ({ Component: c.get() }));
  useEffect(() => {
    if (state.Component !== undefined) return;
    let live = true;
    c.load().then(
      (m) => live && setState({ Component: m }),
      (e: unknown) => live && setState({ error: e }),
    );
    return () => {
      live = false;
    };
  }, [c, state.Component]);
  return state;
}

function Pending({ error }: { error?: unknown }) {
  if (error !== undefined) return <Alert color="red">The editor did not load ({String(error)}); reload the page.</Alert>;
  return (
    <Center p="md">
      <Loader size="sm" aria-label="Loading the editor" />
    </Center>
  );
}

/** YamlEditor loads CodeMirror on first use. */
export function YamlEditor(p: ComponentProps<typeof YamlEditorView>) {
  const { Component, error } = useChunk(yamlChunk);
  return Component ? <Component {...p} /> : <Pending error={error} />;
}

/** MergeDiff loads CodeMirror's merge view on first use. */
export function MergeDiff(p: ComponentProps<typeof MergeDiffView>) {
  const { Component, error } = useChunk(mergeChunk);
  return Component ? <Component {...p} /> : <Pending error={error} />;
}

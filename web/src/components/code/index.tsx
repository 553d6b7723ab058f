import { Center, Loader } from '@mantine/core';
import { lazy, Suspense, type ComponentProps } from 'react';

const loadYaml = () => import('./YamlEditor');
const loadMerge = () => import('./MergeDiff');
const LazyYaml = lazy(loadYaml);
const LazyMerge = lazy(loadMerge);

/** preloadEditor starts loading CodeMirror while a page fetches its data. */
export function preloadEditor(kind: 'yaml' | 'merge') {
  void (kind === 'yaml' ? loadYaml() : loadMerge());
}

const fallback = (
  <Center p="md">
    <Loader size="sm" aria-label="Loading the editor" />
  </Center>
);

/** YamlEditor loads CodeMirror on first use. */
export function YamlEditor(p: ComponentProps<typeof LazyYaml>) {
  return (
    <Suspense fallback={fallback}>
      <LazyYaml {...p} />
    </Suspense>
  );
}

/** MergeDiff loads CodeMirror's merge view on first use. */
export function MergeDiff(p: ComponentProps<typeof LazyMerge>) {
  return (
    <Suspense fallback={fallback}>
      <LazyMerge {...p} />
    </Suspense>
  );
}

// The canary's options (node selector, automatic analysis) and the scope
// its confirmation names, shared by the canary page's form and the change
// page's "Publish as a canary".
import { Alert, Checkbox, NativeSelect, SimpleGrid, Text, TextInput } from '@mantine/core';
import { useState } from 'react';
import type { Node } from '../../api/client';
import type { CanaryAnalysis } from '../../api/fleet';
import { plural } from '../../components/format';
import { matches, parseSelector, type Selector } from '../nodes/labels';
import { analysisFrom, defaultAnalysis, type AnalysisForm } from './analysis';

export type CanaryOptions = ReturnType<typeof useCanaryOptions>;

/** useCanaryOptions is the canary form's state and what it reads as: a selector of at least one label and the analysis (or none). */
export function useCanaryOptions() {
  const [selText, setSelText] = useState('');
  const [analyse, setAnalyse] = useState(true);
  const [form, setForm] = useState<AnalysisForm>(defaultAnalysis);
  const sel = parseSelector(selText);
  const selector: Selector | undefined = sel.selector && Object.keys(sel.selector).length > 0 ? sel.selector : undefined;
  const selError = sel.error ?? (selText.trim() !== '' && !selector ? 'at least one label' : undefined);
  const an = analyse ? analysisFrom(form) : undefined;
  const analysis: CanaryAnalysis | undefined = an?.analysis;
  return { selText, setSelText, analyse, setAnalyse, form, setForm, selector, selError, analysis, analysisError: an?.error, ok: selector !== undefined && !an?.error };
}

/** CanaryFields are the selector and the analysis' fields. */
export function CanaryFields({ o }: { o: CanaryOptions }) {
  const field = (k: keyof AnalysisForm, label: string, description?: string) => (
    <TextInput label={label} description={description} value={o.form[k]} onChange={(e) => o.setForm({ ...o.form, [k]: e.currentTarget.value })} disabled={!o.analyse} />
  );
  return (
    <>
      <TextInput label="Node selector" description="labels the canary nodes all have, e.g. pool=canary" placeholder="pool=canary" value={o.selText} onChange={(e) => o.setSelText(e.currentTarget.value)} error={o.selError} w={320} required />
      <Checkbox label="Judge it automatically (abort on a breach)" checked={o.analyse} onChange={(e) => o.setAnalyse(e.currentTarget.checked)} />
      <SimpleGrid cols={{ base: 1, sm: 3 }}>
        {field('window', 'Window', 'each comparison, e.g. 60s')}
        {field('maxRejectRateIncrease', 'Max reject rate increase', 'a share: 0.05 is 5 points')}
        {field('max5xxRateIncrease', 'Max 5xx rate increase', 'a share: 0.02 is 2 points')}
        {field('maxP99Ratio', 'Max p99 ratio', 'canary p99 / baseline p99')}
        {field('minRequests', 'Min requests', 'per side per window before judging')}
        <NativeSelect
          label="On pass"
          value={o.form.onPass}
          onChange={(e) => o.setForm({ ...o.form, onPass: e.currentTarget.value as 'promote' | 'hold' })}
          data={[{ value: 'hold', label: 'hold for a person' }, { value: 'promote', label: 'promote to all nodes' }]}
          disabled={!o.analyse}
        />
      </SimpleGrid>
      {o.analysisError && <Text size="sm" c="red">{o.analysisError}</Text>}
    </>
  );
}

/** canaryNodes are the live nodes the selector matches now. */
export function canaryNodes(nodes: Node[] | undefined, selector: Selector | undefined): Node[] {
  return selector ? (nodes ?? []).filter((n) => n.live && matches(n.labels, selector)) : [];
}

/** CanaryScope says where the canary runs (the live nodes the selector matches now) and how it is judged. */
export function CanaryScope({ ns, o, nodes }: { ns: string; o: CanaryOptions; nodes: Node[] | undefined }) {
  const matching = canaryNodes(nodes, o.selector);
  const sel = o.selText.trim();
  return (
    <>
      <Text size="sm">
        On {sel}: {plural(matching.length, 'live node')} now
        {matching.length > 0 ? ` (${matching.map((n) => n.nodeId).join(', ')})` : ''}; the other nodes of {ns} keep their version.{' '}
        {o.analysis ? `Judged every ${o.analysis.window ?? '60s'}, aborted on a breach.` : 'No automatic analysis: promote or abort by hand.'}
      </Text>
      {matching.length === 0 && (
        <Alert color="orange" role="alert">
          No live node matches {sel}: the canary runs nowhere until one joins.
        </Alert>
      )}
    </>
  );
}

import { Alert, Button, Group, List, Modal, NativeSelect, Paper, Stack, Text, Textarea, TextInput, Title } from '@mantine/core';
import { useEffect, useMemo, useState } from 'react';
import { useNavigate, useParams, useSearchParams } from 'react-router';
import { preloadEditor, MergeDiff, YamlEditor } from '../../components/code';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page } from '../../components/Page';
import { allows, useMe } from '../auth/session';
import { publishedVersion } from '../canary/summary';
import { summarize } from '../changes/summary';
import { plural } from '../../components/format';
import { useNodes } from '../namespaces/hooks';
import { useCanary } from '../nodes/hooks';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { useRollback, useVersionDiff, useVersions, useVersionYaml } from './hooks';
import { RolloutTable } from './RolloutTable';

/**
 * RollbackDialog confirms a rollback to version n with its scope: what it
 * changes against the published version (from) and the live nodes it
 * reaches: at once for an emergency rollback, after review otherwise.
 */
function RollbackDialog({ ns, n, from, emergency, opened, onClose }: { ns: string; n: number; from: number | undefined; emergency: boolean; opened: boolean; onClose: () => void }) {
  const rollback = useRollback(ns, n);
  const live = (useNodes(ns).data?.items ?? []).filter((x) => x.live).length;
  const diff = useVersionDiff(ns, opened ? from : undefined, opened && from !== undefined ? n : undefined);
  const { lines } = useMemo(() => summarize(diff.data), [diff.data]);
  const navigate = useNavigate();
  const [reason, setReason] = useState('');
  const [typed, setTyped] = useState('');
  const ok = !emergency || (reason.trim() !== '' && typed === ns);
  return (
    <Modal opened={opened} onClose={onClose} title={emergency ? `Emergency rollback to v${n}` : `Roll back to v${n}`}>
      <Stack
        component="form"
        onSubmit={(e) => {
          e.preventDefault();
          rollback.mutate(
            { reason, emergency },
            {
              // The emergency rollback lands on the new version's page (this
              // same component): close the dialog, or it stays open for it.
              onSuccess: (r) => {
                onClose();
                navigate(r.change ? `/namespaces/${ns}/changes/${r.change.id}` : `/namespaces/${ns}/versions/${r.version?.number}`);
              },
            },
          );
        }}
      >
        <Text size="sm">
          {emergency
            ? `This publishes version ${n}'s rules to ${plural(live, 'live node')} of ${ns} at once, without review, and flags it in the audit log.`
            : `This opens a change with version ${n}'s rules; an approver reviews it and publishes it to the nodes of ${ns} (${plural(live, 'live node')} now).`}
        </Text>
        {from !== undefined && (
          <Stack gap={4} aria-label="What the rollback changes">
            <Text size="sm" fw={600}>
              Against the published v{from}: {diff.data ? plural(lines.length, 'rule change') : '…'}
            </Text>
            {lines.length > 0 && (
              <List size="sm" spacing={2}>
                {lines.slice(0, 8).map((l, i) => (
                  <List.Item key={i}>
                    <Text ff="monospace" size="sm">
                      {l.text}
                    </Text>
                  </List.Item>
                ))}
                {lines.length > 8 && <List.Item>and {lines.length - 8} more</List.Item>}
              </List>
            )}
          </Stack>
        )}
        <ErrorAlert error={rollback.error} />
        <Textarea label="Reason" required={emergency} value={reason} onChange={(e) => setReason(e.currentTarget.value)} autosize minRows={2} />
        {emergency && <TextInput label={`Type the namespace name (${ns}) to confirm`} value={typed} onChange={(e) => setTyped(e.currentTarget.value)} autoComplete="off" />}
        <Group justify="flex-end">
          <Button type="submit" color={emergency ? 'red' : undefined} disabled={!ok} loading={rollback.isPending}>
            {emergency ? 'Roll back now' : 'Open rollback change'}
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}

export function VersionPage() {
  const params = useParams();
  const ns = params.ns!;
  const n = Number(params.n);
  const [search, setSearch] = useSearchParams();
  const diffWith = search.get('diff');
  const other = diffWith === null ? undefined : Number(diffWith);
  const me = useMe();
  useEffect(() => preloadEditor(other !== undefined ? 'merge' : 'yaml'), [other]);
  // YAML made by a web worker (fetch, JSON and YAML off the main thread).
  const doc = useVersionYaml(ns, n);
  const otherDoc = useVersionYaml(ns, other);
  const diff = useVersionDiff(ns, other, other === undefined ? undefined : n);
  const versions = useVersions(ns);
  // The dialog stays mounted (open or not), so Mantine returns the focus to
  // the button that opened it when it closes.
  const [dialog, setDialog] = useState<'normal' | 'emergency'>('normal');
  const [dialogOpen, setDialogOpen] = useState(false);
  const openDialog = (d: 'normal' | 'emergency') => {
    setDialog(d);
    setDialogOpen(true);
  };
  const latest = versions.data?.items?.[0]?.number;
  const published = publishedVersion(versions.data?.items ?? [], useCanary(ns).data?.version);
  const numbers = ['', '0', ...(versions.data?.items ?? []).map((v) => String(v.number)).filter((x) => x !== String(n))];
  const { lines } = useMemo(() => summarize(diff.data), [diff.data]);
  const docYaml = doc.data;
  const otherYaml = otherDoc.data;

  return (
    <Page title={`Version ${n}`} crumbs={[...nsCrumbs(ns), { to: `/namespaces/${ns}/versions`, label: 'Versions' }]} actions={<NamespaceNav ns={ns} />}>
      <Group wrap="wrap" align="flex-end">
        <NativeSelect
          label="Diff against version"
          data={numbers.map((x) => ({ value: x, label: x === '' ? '(none)' : x === '0' ? '0 (empty)' : `v${x}` }))}
          value={diffWith ?? ''}
          onChange={(e) => setSearch(e.currentTarget.value === '' ? {} : { diff: e.currentTarget.value })}
        />
        {allows(me.data?.role, 'editor') && latest !== undefined && latest !== n && (
          <Button variant="default" onClick={() => openDialog('normal')}>
            Roll back to v{n}
          </Button>
        )}
        {allows(me.data?.role, 'admin') && latest !== undefined && latest !== n && (
          <Button color="red" variant="light" onClick={() => openDialog('emergency')}>
            Emergency rollback
          </Button>
        )}
      </Group>
      {doc.isPending && <Loading />}
      <ErrorAlert error={doc.error ?? otherDoc.error ?? diff.error} />
      {other !== undefined ? (
        <Stack>
          <Paper withBorder p="md">
            <Title order={2} size="h4" mb="xs">
              From v{other} to v{n}
            </Title>
            {lines.length === 0 ? <Text c="dimmed">No rule changes.</Text> : (
              <List aria-label="Summary">
                {lines.map((l, i) => (
                  <List.Item key={i}>
                    <Text ff="monospace" size="sm">{l.text}</Text>
                  </List.Item>
                ))}
              </List>
            )}
          </Paper>
          {docYaml !== undefined && otherYaml !== undefined ? <MergeDiff a={otherYaml} b={docYaml} label={`Version ${other} and version ${n}`} /> : <Loading />}
        </Stack>
      ) : (
        docYaml !== undefined && <YamlEditor label={`Version ${n} YAML`} value={docYaml} readOnly />
      )}
      {latest === n && <Alert color="gray">This is the newest version.</Alert>}
      {Number.isInteger(n) && n > 0 && <RolloutTable ns={ns} n={n} />}
      <RollbackDialog key={`${n}-${dialog}`} ns={ns} n={n} from={published} emergency={dialog === 'emergency'} opened={dialogOpen} onClose={() => setDialogOpen(false)} />
    </Page>
  );
}

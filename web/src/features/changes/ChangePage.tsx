import { Alert, Anchor, Badge, Button, Checkbox, Group, List, Paper, Stack, Text, Textarea, Title, Tooltip } from '@mantine/core';
import { useEffect, useMemo, useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import type { Change, Limit } from '../../api/client';
import { preloadEditor, MergeDiff } from '../../components/code';
import { plural } from '../../components/format';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, when } from '../../components/Page';
import { allows, useMe, type Me } from '../auth/session';
import { toYaml } from '../draft/ruleset';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { ResetDraftButton } from '../draft/ResetDraft';
import { CanaryStatus } from '../canary/CanaryStatus';
import { useCanary } from '../nodes/hooks';
import { useRollout, useVersionDoc, useVersions } from '../versions/hooks';
import { applyDiff } from './applyDiff';
import { stateColor } from './ChangesPage';
import { useChange, useChangeAction, usePublish } from './hooks';
import { PreviewSection, PreviewSummary } from './PreviewPanel';
import { PublishPanel } from './PublishPanel';
import { summarize, warningsOf } from './summary';
import { WarningList } from './WarningList';

/** approveBlock says why the signed-in user may not approve, or null when they may. */
export function approveBlock(me: Me | null | undefined, c: Change): string | null {
  if (!allows(me?.role, 'approver')) return 'Approving needs the approver role.';
  if (c.state !== 'open') return `The change is ${c.state}; only open changes are approved.`;
  if (c.stale) return 'The change is stale (a newer version was published): reopen it first.';
  const uid = me?.user.id;
  if (c.author === me?.user.username) return 'You opened this change: a second person must approve it (four eyes).';
  if (uid !== undefined && (c.contributors ?? []).includes(uid)) return 'You edited this change’s draft: a second person must approve it (four eyes).';
  return null;
}

function Rollout({ ns, n, follow }: { ns: string; n: number; follow: boolean }) {
  const r = useRollout(ns, n, follow);
  const canary = useCanary(ns, 5_000).data;
  const applied = (r.data?.applied ?? []).filter((a) => a.live && a.current).length;
  const waiting = r.data?.waiting ?? [];
  const done = r.data?.rulesetAt && waiting.length === 0;
  return (
    <Alert color={done || !follow ? 'green' : 'blue'} title={`Published version ${n}`} role="status">
      {r.error ? (
        <Text size="sm">Publication state unavailable.</Text>
      ) : !r.data?.rulesetAt && r.data?.canaryAt ? (
        canary?.version === n ? (
          <>
            <Text size="sm">Published as a canary: only the nodes its selector matches run it until it is promoted.</Text>
            <CanaryStatus ns={ns} />
          </>
        ) : (
          <Text size="sm">Published as a canary, never to every node (the canary ended without a promotion).</Text>
        )
      ) : !r.data?.rulesetAt ? (
        <Text size="sm">Writing to etcd…</Text>
      ) : follow ? (
        <Text size="sm">
          Running on {applied} of {plural(applied + waiting.length, 'live node')}{done ? '.' : `; waiting for ${waiting.map((w) => w.nodeId).join(', ')}.`}
        </Text>
      ) : (
        <Text size="sm">
          Applied by {plural((r.data?.applied ?? []).length, 'node')}; {plural(applied, 'live node')} still {applied === 1 ? 'runs' : 'run'} it.
        </Text>
      )}
      <Anchor component={Link} to={`/namespaces/${ns}/versions/${n}`} size="sm">
        View version {n}
      </Anchor>
    </Alert>
  );
}

export function ChangePage() {
  const params = useParams();
  const ns = params.ns!;
  const id = Number(params.id);
  const me = useMe();
  useEffect(() => preloadEditor('merge'), []);
  const q = useChange(ns, id);
  const action = useChangeAction(ns, id);
  const publish = usePublish(ns, id);
  const [comment, setComment] = useState('');
  // Approving a flagged change needs each flag confirmed (by its index).
  const [confirmed, setConfirmed] = useState<ReadonlySet<number>>(new Set());
  const [kept, setKept] = useState(false);
  const newest = useVersions(ns, 1).data?.items?.[0]?.number ?? 0;
  const navigate = useNavigate();
  const c = q.data;
  const base = useVersionDoc(ns, c ? (c.baseVersion ?? 0) : undefined);
  const published = useVersionDoc(ns, c?.publishedVersion ?? undefined);
  // The proposed document and both YAML texts, once per change (10,000
  // rules take a while), not per render.
  const view = useMemo(() => {
    if (!c) return undefined;
    const after = published.data ?? (base.data ? applyDiff(base.data, c.diff) : undefined);
    return {
      after,
      summary: summarize(c.diff, warningsOf(c), after),
      yaml: base.data && after ? { a: toYaml(base.data), b: toYaml(after as never) } : undefined,
    };
  }, [c, base.data, published.data]);

  if (q.isPending) return <Loading />;
  if (!c || !view) return <ErrorAlert error={q.error} />;

  const warnings = warningsOf(c);
  const unconfirmed = c.state === 'open' ? warnings.length - warnings.filter((_, i) => confirmed.has(i)).length : 0;
  const { lines, general } = view.summary;
  const block = approveBlock(me.data, c);
  const canReview = allows(me.data?.role, 'approver');
  const canPublish = canReview && c.state === 'approved' && !c.stale;
  const publishedNow = publish.data && 'number' in publish.data ? publish.data : undefined;
  const publishedVersion = publishedNow?.number ?? c.publishedVersion ?? undefined;
  // The change's limits (scope, key) for the preview's figures.
  const limits = (view.after as { limits?: Limit[] } | undefined)?.limits;
  const previewable = c.state === 'open' || c.state === 'approved';

  return (
    <Page
      title={
        <>
          Change #{c.id}: {c.title}
        </>
      }
      crumbs={[...nsCrumbs(ns), { to: `/namespaces/${ns}/changes`, label: 'Changes' }]}
      actions={<NamespaceNav ns={ns} />}
    >
      <Group gap="xs" wrap="wrap">
        <Badge color={stateColor[c.state ?? ''] ?? 'gray'}>{c.state}</Badge>
        {c.stale && <Badge color="yellow">stale</Badge>}
        {c.publishAt && c.state === 'approved' && (
          <Badge color="indigo" aria-label="Scheduled">
            publishes {when(c.publishAt)}
            {c.scheduledBy ? ` (scheduled by ${c.scheduledBy})` : ''}
          </Badge>
        )}
        {c.rollbackOf ? <Badge color="grape">rollback to v{c.rollbackOf}</Badge> : null}
        <Text size="sm">
          by {c.author}, {when(c.createdAt)}; against v{c.baseVersion ?? 0}
        </Text>
      </Group>
      {c.description && (
        <Paper withBorder p="sm">
          <Text className="pre-wrap" aria-label="Description">
            {c.description}
          </Text>
        </Paper>
      )}

      <Paper withBorder p="md">
        <Title order={2} size="h4" mb="xs">
          What this change does
        </Title>
        {general.length > 0 && <WarningList warnings={general} />}
        {lines.length === 0 ? (
          <Text c="dimmed">No rule changes.</Text>
        ) : (
          <List spacing="xs" aria-label="Summary">
            {lines.map((l, i) => (
              <List.Item key={i}>
                <Text ff="monospace" size="sm">
                  {l.text}
                </Text>
                {l.warnings.length > 0 && <WarningList warnings={l.warnings} />}
              </List.Item>
            ))}
          </List>
        )}
        {c.diff && (
          <Text size="xs" c="dimmed" mt="xs">
            {c.diff.added ?? 0} added, {c.diff.removed ?? 0} removed, {c.diff.changed ?? 0} changed
          </Text>
        )}
      </Paper>

      <PreviewSection ns={ns} id={id} limits={limits} previewable={previewable} canEdit={allows(me.data?.role, 'editor')} />

      <Stack gap="xs">
        <Title order={2} size="h4">
          YAML diff
        </Title>
        <ErrorAlert error={base.error} />
        {view.yaml ? <MergeDiff a={view.yaml.a} b={view.yaml.b} label={`Version ${c.baseVersion ?? 0} and change ${c.id}`} /> : <Loading />}
      </Stack>

      {(c.reviews ?? []).length > 0 && (
        <Paper withBorder p="md">
          <Title order={2} size="h4" mb="xs">
            Reviews
          </Title>
          <List spacing="xs">
            {(c.reviews ?? []).map((r) => (
              <List.Item key={r.id}>
                <Text size="sm">
                  <b>{r.reviewer}</b> {r.decision === 'approve' ? 'approved' : r.decision === 'reject' ? 'rejected' : 'reopened'} {when(r.createdAt)}
                </Text>
                {r.comment && (
                  <Text size="sm" className="pre-wrap">
                    {r.comment}
                  </Text>
                )}
              </List.Item>
            ))}
          </List>
        </Paper>
      )}

      {publishedVersion !== undefined && <Rollout ns={ns} n={publishedVersion} follow={publishedNow !== undefined} />}
      <ErrorAlert error={action.error ?? publish.error} />

      {canReview && (c.state === 'open' || c.state === 'approved') && (
        <Paper withBorder p="md" component="section" aria-label="Review">
          <Stack gap="sm">
            <Title order={2} size="h4">
              Review
            </Title>
            <PreviewSummary ns={ns} id={id} limits={limits} />
            {warnings.length > 0 && c.state === 'open' && (
              <Alert color="orange" title={`This change has ${plural(warnings.length, 'risk flag')}: confirm each to approve`}>
                <Stack gap={6}>
                  {warnings.map((w, i) => (
                    <Checkbox
                      key={i}
                      label={`I have read: ${w.message}`}
                      checked={confirmed.has(i)}
                      onChange={(e) => {
                        const on = e.currentTarget.checked;
                        setConfirmed((s) => {
                          const n = new Set(s);
                          if (on) n.add(i);
                          else n.delete(i);
                          return n;
                        });
                      }}
                    />
                  ))}
                </Stack>
              </Alert>
            )}
            <Textarea label="Comment" autosize minRows={2} value={comment} onChange={(e) => setComment(e.currentTarget.value)} />
            <Group wrap="wrap">
              {c.state === 'open' && (
                <Tooltip label={block ?? ''} disabled={!block}>
                  <span>
                    <Button color="teal" disabled={!!block || unconfirmed > 0} loading={action.isPending && action.variables?.action === 'approve'} onClick={() => action.mutate({ action: 'approve', comment }, { onSuccess: () => setComment('') })} aria-describedby={block ? 'approve-block' : undefined}>
                      Approve
                    </Button>
                  </span>
                </Tooltip>
              )}
              <Button color="red" variant="light" onClick={() => action.mutate({ action: 'reject', comment }, { onSuccess: () => setComment('') })} loading={action.isPending && action.variables?.action === 'reject'} disabled={c.author === me.data?.user.username}>
                Reject
              </Button>
            </Group>
            {canPublish && <PublishPanel ns={ns} c={c} lines={lines} warnings={warnings.length} newest={newest} publish={publish} />}
            {block && c.state === 'open' && (
              <Text size="sm" c="dimmed" id="approve-block">
                {block}
              </Text>
            )}
          </Stack>
        </Paper>
      )}
      {!canReview && c.state === 'open' && <Text size="sm" c="dimmed">An approver reviews this change.</Text>}
      {allows(me.data?.role, 'editor') && c.state === 'rejected' && !kept && (
        <Alert color="yellow" title="Rejected: its edits are still in the draft">
          <Text size="sm" mb="xs">
            The shared draft still holds what this change proposed (unless someone edited it since). Reset it to the published rules, or keep it to rework.
          </Text>
          <Group>
            <ResetDraftButton ns={ns} version={newest} dropped="every edit in the draft that is not published is dropped." onDone={() => navigate(`/namespaces/${ns}/draft`)} />
            <Button variant="default" onClick={() => setKept(true)}>
              Keep the draft
            </Button>
          </Group>
        </Alert>
      )}
      {allows(me.data?.role, 'editor') && (c.stale || c.state === 'rejected') && (
        <Button variant="default" onClick={() => action.mutate({ action: 'reopen', comment })} style={{ alignSelf: 'flex-start' }}>
          Reopen on the newest version
        </Button>
      )}
    </Page>
  );
}

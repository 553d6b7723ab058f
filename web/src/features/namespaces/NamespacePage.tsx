import { Anchor, Button, Group, SimpleGrid, Paper, Text, Title } from '@mantine/core';
import { Link, useLocation, useParams } from 'react-router';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, when } from '../../components/Page';
import { CanaryStatus } from '../canary/CanaryStatus';
import { fleetCounts, fleetText, publishedVersion } from '../canary/summary';
import { useChanges } from '../changes/hooks';
import { useCanary } from '../nodes/hooks';
import { useVersions } from '../versions/hooks';
import { useNamespace, useNodes } from './hooks';

export function nsCrumbs(ns: string) {
  return [
    { to: '/namespaces', label: 'Namespaces' },
    { to: `/namespaces/${ns}`, label: ns },
  ];
}

const sections = [
  ['draft', 'Draft'],
  ['changes', 'Changes'],
  ['versions', 'Versions'],
  ['nodes', 'Nodes'],
  ['traffic', 'Traffic'],
  ['events', 'Events'],
  ['canary', 'Canary'],
] as const;

/**
 * NamespaceNav links a namespace's pages; the current section (a change
 * page is in Changes, a version page in Versions) is marked filled and
 * with aria-current="page".
 */
export function NamespaceNav({ ns }: { ns: string }) {
  const { pathname } = useLocation();
  return (
    <Group gap="xs" wrap="wrap" role="navigation" aria-label={`Namespace ${ns}`}>
      {sections.map(([seg, label]) => {
        const to = `/namespaces/${ns}/${seg}`;
        const current = pathname === to || pathname.startsWith(to + '/');
        return (
          <Button key={seg} component={Link} to={to} variant={current ? 'filled' : 'light'} size="xs" aria-current={current ? 'page' : undefined}>
            {label}
          </Button>
        );
      })}
    </Group>
  );
}

export function NamespacePage() {
  const ns = useParams().ns!;
  const q = useNamespace(ns);
  const versions = useVersions(ns);
  const open = useChanges(ns, 'open');
  const approved = useChanges(ns, 'approved');
  const scheduled = (approved.data?.items ?? []).filter((c) => c.publishAt);
  const nodes = useNodes(ns);
  // The published version, not the newest: an active (or aborted) canary's version is newer.
  const canary = useCanary(ns, 5_000).data;
  const items = versions.data?.items ?? [];
  const published = publishedVersion(items, canary?.version);
  const latest = items.find((v) => v.number === published);
  return (
    <Page title={`Namespace ${ns}`} crumbs={nsCrumbs(ns).slice(0, 1)} actions={<NamespaceNav ns={ns} />}>
      {q.isPending && <Loading />}
      <ErrorAlert error={q.error} />
      {q.data && <Text className="pre-wrap">{q.data.description || 'No description.'}</Text>}
      <SimpleGrid cols={{ base: 1, sm: 3 }}>
        <Paper withBorder p="md">
          <Title order={2} size="h5">
            Published
          </Title>
          {latest ? (
            <Text>
              <Anchor component={Link} to={`/namespaces/${ns}/versions/${latest.number}`}>
                v{latest.number}
              </Anchor>{' '}
              by {latest.createdBy}, {when(latest.createdAt)}
            </Text>
          ) : (
            <Text c="dimmed">Nothing published yet.</Text>
          )}
          <CanaryStatus ns={ns} />
        </Paper>
        <Paper withBorder p="md">
          <Title order={2} size="h5">
            Open changes
          </Title>
          {(open.data?.items ?? []).map((c) => (
            <Text key={c.id}>
              <Anchor component={Link} to={`/namespaces/${ns}/changes/${c.id}`}>
                #{c.id} {c.title}
              </Anchor>
            </Text>
          ))}
          {open.data && (open.data.items ?? []).length === 0 && <Text c="dimmed">None.</Text>}
          {scheduled.length > 0 && (
            <>
              <Title order={3} size="h6" mt="sm">
                Scheduled publishes
              </Title>
              {scheduled.map((c) => (
                <Text key={c.id}>
                  <Anchor component={Link} to={`/namespaces/${ns}/changes/${c.id}`}>
                    #{c.id} {c.title}
                  </Anchor>{' '}
                  publishes {when(c.publishAt!)}
                  {c.scheduledBy ? ` (scheduled by ${c.scheduledBy})` : ''}
                </Text>
              ))}
            </>
          )}
        </Paper>
        <Paper withBorder p="md">
          <Title order={2} size="h5">
            Nodes
          </Title>
          {nodes.error ? (
            <Text c="dimmed">Node registry unavailable.</Text>
          ) : (
            <Text>{fleetText(fleetCounts(nodes.data?.items ?? []), published, canary?.version)}</Text>
          )}
        </Paper>
      </SimpleGrid>
    </Page>
  );
}

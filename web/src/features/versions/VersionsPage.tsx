import { Anchor, Badge, Button, Group, NativeSelect, Table, Text } from '@mantine/core';
import { useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, When } from '../../components/Page';
import { CanaryStatus } from '../canary/CanaryStatus';
import { publishedVersion, rolledBack } from '../canary/summary';
import { useChanges } from '../changes/hooks';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { useCanary } from '../nodes/hooks';
import { useVersions } from './hooks';

export function VersionsPage() {
  const ns = useParams().ns!;
  const q = useVersions(ns);
  const navigate = useNavigate();
  const items = q.data?.items ?? [];
  // Authors come from the published changes (the newest 50); the publisher
  // is an approver (publishing needs the role), shown per version.
  const published = useChanges(ns, 'published');
  const byId = new Map((published.data?.items ?? []).map((c) => [c.id, c]));
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const numbers = items.map((v) => String(v.number));
  // Markers: the version every node runs (current), the active canary's,
  // and the versions a later rollback rolled back from.
  const canary = useCanary(ns).data;
  const current = publishedVersion(items, canary?.version);
  const rolledBackBy = rolledBack(items);
  return (
    <Page title="Versions" crumbs={nsCrumbs(ns)} actions={<NamespaceNav ns={ns} />}>
      {q.isPending && <Loading />}
      <ErrorAlert error={q.error} />
      {q.data && items.length === 0 && <Text>Nothing has been published yet.</Text>}
      <CanaryStatus ns={ns} />
      {items.length > 1 && (
        <Group align="flex-end" component="form" onSubmit={(e) => { e.preventDefault(); navigate(`/namespaces/${ns}/versions/${to || numbers[0]}?diff=${from || numbers[1]}`); }} aria-label="Compare versions">
          <NativeSelect label="Compare version" data={numbers} value={from || numbers[1]} onChange={(e) => setFrom(e.currentTarget.value)} />
          <NativeSelect label="with version" data={numbers} value={to || numbers[0]} onChange={(e) => setTo(e.currentTarget.value)} />
          <Button type="submit" variant="default">
            Compare
          </Button>
        </Group>
      )}
      {items.length > 0 && (
        <Table.ScrollContainer minWidth={680}>
          <Table aria-label="Versions" highlightOnHover>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Version</Table.Th>
                <Table.Th>Author</Table.Th>
                <Table.Th>Published by</Table.Th>
                <Table.Th>When</Table.Th>
                <Table.Th>From</Table.Th>
                <Table.Th>Publication</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((v) => (
                <Table.Tr key={v.number}>
                  <Table.Td>
                    <Anchor component={Link} to={`/namespaces/${ns}/versions/${v.number}`}>
                      v{v.number}
                    </Anchor>{' '}
                    {v.number === current && <Badge color="green">current</Badge>} {v.number === canary?.version && <Badge color="yellow">canary</Badge>}{' '}
                    {v.rollbackOf ? <Badge color="grape">rollback to v{v.rollbackOf}</Badge> : null} {v.emergency && <Badge color="red">emergency</Badge>}{' '}
                    {rolledBackBy.has(v.number ?? -1) && <Badge color="gray">rolled back by v{rolledBackBy.get(v.number ?? -1)}</Badge>}
                  </Table.Td>
                  <Table.Td>{v.changeId ? byId.get(v.changeId)?.author : v.createdBy}</Table.Td>
                  <Table.Td>{v.createdBy}</Table.Td>
                  <Table.Td><When t={v.createdAt} /></Table.Td>
                  <Table.Td>
                    {v.changeId ? (
                      <Anchor component={Link} to={`/namespaces/${ns}/changes/${v.changeId}`}>
                        change #{v.changeId}
                      </Anchor>
                    ) : (
                      <Text size="sm" className="pre-wrap">
                        {v.reason}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>
                    <Badge color={v.publication?.state === 'published' ? 'green' : v.publication?.state === 'failed' ? 'red' : 'yellow'}>{v.publication?.state ?? 'n/a'}</Badge>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </Page>
  );
}

import { Anchor, Badge, SegmentedControl, Table, Text } from '@mantine/core';
import { useState } from 'react';
import { Link, useParams } from 'react-router';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, when, When } from '../../components/Page';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { useChanges } from './hooks';
import { warningsOf } from './summary';

export const stateColor: Record<string, string> = { open: 'blue', approved: 'teal', rejected: 'red', published: 'gray' };

export function ChangesPage() {
  const ns = useParams().ns!;
  const [state, setState] = useState<'all' | 'open' | 'approved' | 'rejected' | 'published'>('all');
  const q = useChanges(ns, state === 'all' ? undefined : state);
  const items = q.data?.items ?? [];
  return (
    <Page title="Changes" crumbs={nsCrumbs(ns)} actions={<NamespaceNav ns={ns} />}>
      <SegmentedControl
        aria-label="State"
        value={state}
        onChange={(v) => setState(v as typeof state)}
        data={['all', 'open', 'approved', 'rejected', 'published']}
        style={{ alignSelf: 'flex-start' }}
      />
      {q.isPending && <Loading />}
      <ErrorAlert error={q.error} />
      {q.data && items.length === 0 && <Text>No changes{state === 'all' ? '' : ` in state ${state}`}.</Text>}
      {items.length > 0 && (
        <Table.ScrollContainer minWidth={560}>
          <Table aria-label="Changes" highlightOnHover>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Change</Table.Th>
                <Table.Th>State</Table.Th>
                <Table.Th>Author</Table.Th>
                <Table.Th>Updated</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((c) => (
                <Table.Tr key={c.id}>
                  <Table.Td>
                    <Anchor component={Link} to={`/namespaces/${ns}/changes/${c.id}`}>
                      #{c.id} {c.title}
                    </Anchor>
                    {warningsOf(c).length > 0 && (
                      <Badge color="orange" ml="xs" size="sm">
                        {warningsOf(c).length} risk flag{warningsOf(c).length > 1 ? 's' : ''}
                      </Badge>
                    )}
                  </Table.Td>
                  <Table.Td>
                    <Badge color={stateColor[c.state ?? ''] ?? 'gray'}>{c.state}</Badge> {c.stale && <Badge color="yellow">stale</Badge>}{' '}
                    {c.publishAt && c.state === 'approved' && <Badge color="indigo">publishes {when(c.publishAt)}</Badge>}
                  </Table.Td>
                  <Table.Td>{c.author}</Table.Td>
                  <Table.Td><When t={c.updatedAt} /></Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </Page>
  );
}

import { Alert, Badge, Button, Code, Group, Table, Text, TextInput } from '@mantine/core';
import { useInfiniteQuery, useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { client, unwrap } from '../../api/client';
import { keys } from '../../api/keys';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, When } from '../../components/Page';

type Filter = { namespace: string; actor: string; action: string; since: string; until: string };
const emptyFilter: Filter = { namespace: '', actor: '', action: '', since: '', until: '' };

/** toQuery drops empty filters and turns local datetime inputs into RFC 3339. */
function toQuery(f: Filter): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(f)) {
    if (!v) continue;
    out[k] = k === 'since' || k === 'until' ? new Date(v).toISOString() : v;
  }
  return out;
}

export function AuditPage() {
  const [form, setForm] = useState<Filter>(emptyFilter);
  const [filter, setFilter] = useState<Record<string, string>>({});
  const q = useInfiniteQuery({
    queryKey: keys.audit(filter),
    initialPageParam: 0,
    queryFn: ({ pageParam }) => unwrap(client.GET('/api/v1/audit', { params: { query: { ...filter, ...(pageParam ? { before: pageParam } : {}), limit: 50 } } })),
    getNextPageParam: (last) => last.next || undefined,
  });
  const verify = useMutation({ mutationFn: () => unwrap(client.GET('/api/v1/audit/verify')) });
  const events = (q.data?.pages ?? []).flatMap((p) => p.items ?? []);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setFilter(toQuery(form));
  };
  const field = (k: keyof Filter, label: string, type = 'text') => (
    <TextInput label={label} type={type} value={form[k]} onChange={(e) => setForm({ ...form, [k]: e.currentTarget.value })} />
  );
  return (
    <Page title="Audit log">
      <Group component="form" onSubmit={submit} align="flex-end" wrap="wrap" aria-label="Filter the audit log">
        {field('namespace', 'Namespace')}
        {field('actor', 'Actor')}
        {field('action', 'Action')}
        {field('since', 'Since', 'datetime-local')}
        {field('until', 'Until', 'datetime-local')}
        <Button type="submit">Filter</Button>
        <Button variant="default" onClick={() => verify.mutate()} loading={verify.isPending}>
          Verify chain
        </Button>
      </Group>
      {verify.data && (
        <Alert color={verify.data.ok ? 'green' : 'red'} role="status" title={verify.data.ok ? 'The chain is intact' : 'The chain is broken'}>
          Checked {verify.data.checked} events.
          {!verify.data.ok && ` First broken event: ${verify.data.firstBroken}. ${verify.data.reason ?? ''}`}
        </Alert>
      )}
      <ErrorAlert error={verify.error ?? q.error} />
      {q.isPending && <Loading />}
      {q.data && events.length === 0 && <Text>No events match.</Text>}
      {events.length > 0 && (
        <Table.ScrollContainer minWidth={700}>
          <Table aria-label="Audit events" striped>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>When</Table.Th>
                <Table.Th>Actor</Table.Th>
                <Table.Th>Action</Table.Th>
                <Table.Th>Object</Table.Th>
                <Table.Th>Client</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {events.map((e) => (
                <Table.Tr key={e.id}>
                  <Table.Td><When t={e.at} /></Table.Td>
                  <Table.Td>{e.actor}</Table.Td>
                  <Table.Td>
                    <Code>{e.action}</Code> {e.emergency && <Badge color="red">emergency</Badge>}
                  </Table.Td>
                  <Table.Td>
                    {e.namespace ? `${e.namespace}: ` : ''}
                    {e.object}
                  </Table.Td>
                  <Table.Td>
                    <Text size="xs">
                      {e.clientAddr} {e.requestId}
                    </Text>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {q.hasNextPage && (
        <Button variant="default" onClick={() => q.fetchNextPage()} loading={q.isFetchingNextPage} style={{ alignSelf: 'flex-start' }}>
          Older events
        </Button>
      )}
    </Page>
  );
}

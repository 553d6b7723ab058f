import { Alert, Badge, Button, Code, Group, NativeSelect, Stack, Table, Text, TextInput } from '@mantine/core';
import { useInfiniteQuery, useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { client, unwrap } from '../../api/client';
import { keys } from '../../api/keys';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, When } from '../../components/Page';
import { reasonOf, whatChanged } from './describe';

// The action filter offers the API's list (api/openapi.yaml's AuditAction).
const actionOptions = [{ value: '', label: 'Any action' }, ...__AUDIT_ACTIONS__.map((a) => ({ value: a, label: a }))];

// A long diff (an added rule) shows its first lines; the whole is the cell's title.
function fullText(before: unknown, after: unknown): string {
  return `before: ${JSON.stringify(before ?? null, null, 1)}\nafter: ${JSON.stringify(after ?? null, null, 1)}`;
}

const shownLines = 4;

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
        <NativeSelect label="Action" data={actionOptions} value={form.action} onChange={(e) => setForm({ ...form, action: e.currentTarget.value })} />
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
        <Table.ScrollContainer minWidth={1180}>
          <Table aria-label="Audit events" striped layout="fixed">
            <Table.Thead>
              <Table.Tr>
                <Table.Th w={100}>When</Table.Th>
                <Table.Th w={90}>Actor</Table.Th>
                <Table.Th w={180}>Action</Table.Th>
                <Table.Th w={200}>Object</Table.Th>
                <Table.Th w={240}>Reason</Table.Th>
                <Table.Th>Before → after</Table.Th>
                <Table.Th w={150}>Request</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {events.map((e) => {
                const lines = whatChanged(e.action, e.before, e.after);
                return (
                  <Table.Tr key={e.id}>
                    <Table.Td style={{ whiteSpace: 'nowrap' }}>
                      <When t={e.at} />
                    </Table.Td>
                    <Table.Td>{e.actor}</Table.Td>
                    <Table.Td>
                      <Code>{e.action}</Code> {e.emergency && <Badge color="red">emergency</Badge>}
                    </Table.Td>
                    <Table.Td style={{ overflowWrap: 'anywhere' }}>{e.object}</Table.Td>
                    <Table.Td style={{ wordBreak: 'break-word' }}>
                      <Text size="sm" lineClamp={4} title={reasonOf(e.after)}>
                        {reasonOf(e.after)}
                      </Text>
                    </Table.Td>
                    <Table.Td title={lines.length > shownLines || lines.some((l) => l.includes('…')) ? fullText(e.before, e.after) : undefined}>
                      <Stack gap={0}>
                        {lines.slice(0, shownLines).map((l, i) => (
                          <Text key={i} size="xs" ff="monospace" style={{ wordBreak: 'break-word' }}>
                            {l}
                          </Text>
                        ))}
                        {lines.length > shownLines && (
                          <Text size="xs" c="dimmed">
                            and {lines.length - shownLines} more
                          </Text>
                        )}
                      </Stack>
                    </Table.Td>
                    <Table.Td>
                      <Text size="xs">{e.clientAddr}</Text>
                      <Text size="xs" ff="monospace" c="dimmed">
                        {e.requestId}
                      </Text>
                    </Table.Td>
                  </Table.Tr>
                );
              })}
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

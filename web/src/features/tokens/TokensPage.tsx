import { Alert, Badge, Button, Code, CopyButton, Group, Paper, Select, Stack, Table, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { client, unwrap, type Role } from '../../api/client';
import { keys } from '../../api/keys';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, when, When } from '../../components/Page';
import { allows, useMe } from '../auth/session';

const roles: Role[] = ['viewer', 'editor', 'approver', 'admin'];

export function TokensPage() {
  const me = useMe();
  const qc = useQueryClient();
  const q = useQuery({ queryKey: keys.tokens, queryFn: () => unwrap(client.GET('/api/v1/tokens')) });
  const create = useMutation({
    mutationFn: (body: { name: string; role: Role; expiresIn?: string }) => unwrap(client.POST('/api/v1/tokens', { body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.tokens }),
  });
  const revoke = useMutation({
    mutationFn: (id: number) => unwrap(client.DELETE('/api/v1/tokens/{id}', { params: { path: { id } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.tokens }),
  });
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const [expiresIn, setExpiresIn] = useState('90d');
  const mine = roles.filter((r) => allows(me.data?.role, r));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name, role, ...(expiresIn ? { expiresIn } : {}) }, { onSuccess: () => setName('') });
  };
  const secret = create.data?.token;
  return (
    <Page title="API tokens">
      {secret && (
        <Alert color="green" title="Token created: copy it now, it is shown only once" role="status">
          <Group wrap="nowrap" align="center">
            <Code style={{ wordBreak: 'break-all' }} aria-label="New token">
              {secret}
            </Code>
            <CopyButton value={secret}>{({ copied, copy }) => <Button size="xs" onClick={copy}>{copied ? 'Copied' : 'Copy'}</Button>}</CopyButton>
          </Group>
        </Alert>
      )}
      <Paper withBorder p="md" component="form" onSubmit={submit} aria-label="Create a token">
        <Stack gap="sm">
          <Title order={2} size="h4">
            Create a token
          </Title>
          <ErrorAlert error={create.error} />
          <Group align="flex-end" wrap="wrap">
            <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} />
            <Select label="Role" description="No higher than yours" data={mine} value={role} onChange={(r) => setRole((r ?? 'viewer') as Role)} allowDeselect={false} />
            <Select
              label="Expires"
              data={[
                { value: '7d', label: 'in 7 days' },
                { value: '30d', label: 'in 30 days' },
                { value: '90d', label: 'in 90 days' },
                { value: '365d', label: 'in a year' },
                { value: '', label: 'never' },
              ]}
              value={expiresIn}
              onChange={(v) => setExpiresIn(v ?? '')}
              allowDeselect={false}
            />
            <Button type="submit" loading={create.isPending}>
              Create token
            </Button>
          </Group>
        </Stack>
      </Paper>
      {q.isPending && <Loading />}
      <ErrorAlert error={q.error ?? revoke.error} />
      {(q.data?.items ?? []).length > 0 && (
        <Table.ScrollContainer minWidth={760}>
          <Table aria-label="Tokens">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Role</Table.Th>
                <Table.Th>Owner</Table.Th>
                <Table.Th>Created</Table.Th>
                <Table.Th>Expires</Table.Th>
                <Table.Th>Last used</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(q.data?.items ?? []).map((t) => (
                <Table.Tr key={t.id}>
                  <Table.Td>{t.name}</Table.Td>
                  <Table.Td>{t.role}</Table.Td>
                  <Table.Td>{t.username}</Table.Td>
                  <Table.Td>
                    <When t={t.createdAt} />
                  </Table.Td>
                  <Table.Td>{t.expiresAt ? <When t={t.expiresAt} /> : 'never'}</Table.Td>
                  <Table.Td>{t.lastUsedAt ? <When t={t.lastUsedAt} /> : 'never'}</Table.Td>
                  <Table.Td>
                    {t.revokedAt ? (
                      <Badge color="gray">revoked {when(t.revokedAt)}</Badge>
                    ) : (
                      <Button size="xs" color="red" variant="light" onClick={() => revoke.mutate(t.id!)} aria-label={`Revoke ${t.name}`}>
                        Revoke
                      </Button>
                    )}
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

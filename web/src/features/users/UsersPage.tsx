import { Button, Group, Paper, PasswordInput, Select, Stack, Switch, Table, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { client, unwrap, type Role } from '../../api/client';
import { keys } from '../../api/keys';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, When } from '../../components/Page';
import { allows, useMe } from '../auth/session';

const roles: Role[] = ['viewer', 'editor', 'approver', 'admin'];

export function UsersPage() {
  const me = useMe();
  const qc = useQueryClient();
  const q = useQuery({ queryKey: keys.users, queryFn: () => unwrap(client.GET('/api/v1/users')), enabled: allows(me.data?.role, 'admin') });
  const create = useMutation({
    mutationFn: (body: { username: string; password: string; role: Role }) => unwrap(client.POST('/api/v1/users', { body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.users }),
  });
  const update = useMutation({
    mutationFn: ({ id, ...body }: { id: number; role?: Role; disabled?: boolean }) => unwrap(client.PATCH('/api/v1/users/{id}', { params: { path: { id } }, body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: keys.users }),
  });
  const [form, setForm] = useState({ username: '', password: '', role: 'viewer' as Role });
  if (!allows(me.data?.role, 'admin')) return <Page title="Users">Managing users needs the admin role.</Page>;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(form, { onSuccess: () => setForm({ username: '', password: '', role: 'viewer' }) });
  };
  return (
    <Page title="Users">
      {q.isPending && <Loading />}
      <ErrorAlert error={q.error ?? update.error} />
      {(q.data?.items ?? []).length > 0 && (
        <Table.ScrollContainer minWidth={520}>
          <Table aria-label="Users">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>User</Table.Th>
                <Table.Th>Role</Table.Th>
                <Table.Th>Enabled</Table.Th>
                <Table.Th>Created</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(q.data?.items ?? []).map((u) => (
                <Table.Tr key={u.id}>
                  <Table.Td>{u.username}</Table.Td>
                  <Table.Td>
                    <Select aria-label={`Role of ${u.username}`} data={roles} value={u.role} onChange={(r) => r && update.mutate({ id: u.id!, role: r as Role })} allowDeselect={false} w={130} />
                  </Table.Td>
                  <Table.Td>
                    <Switch aria-label={`${u.username} enabled`} checked={!u.disabled} onChange={(e) => update.mutate({ id: u.id!, disabled: !e.currentTarget.checked })} />
                  </Table.Td>
                  <Table.Td><When t={u.createdAt} /></Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      <Paper withBorder p="md" component="form" onSubmit={submit} aria-label="Create a user">
        <Stack gap="sm">
          <Title order={2} size="h4">
            Create a user
          </Title>
          <ErrorAlert error={create.error} />
          <Group align="flex-end" wrap="wrap">
            <TextInput label="Username" required value={form.username} onChange={(e) => setForm({ ...form, username: e.currentTarget.value })} />
            <PasswordInput label="Password" description="At least 10 characters, hard to guess: a few unrelated words work well" required value={form.password} onChange={(e) => setForm({ ...form, password: e.currentTarget.value })} />
            <Select label="Role" data={roles} value={form.role} onChange={(r) => setForm({ ...form, role: (r ?? 'viewer') as Role })} allowDeselect={false} />
            <Button type="submit" loading={create.isPending}>
              Create user
            </Button>
          </Group>
        </Stack>
      </Paper>
    </Page>
  );
}

import { Anchor, Badge, Button, Group, Paper, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { plural } from '../../components/format';
import { Link, useNavigate } from 'react-router';
import type { Namespace } from '../../api/client';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, when } from '../../components/Page';
import { allows, useMe } from '../auth/session';
import { fleetCounts, fleetText } from '../canary/summary';
import { useChanges } from '../changes/hooks';
import { useVersions } from '../versions/hooks';
import { useCreateNamespace, useNamespaces, useNodes } from './hooks';

function Row({ ns }: { ns: Namespace }) {
  const name = ns.name ?? '';
  const versions = useVersions(name, 1);
  const open = useChanges(name, 'open');
  const nodes = useNodes(name);
  const latest = versions.data?.items?.[0];
  return (
    <Table.Tr>
      <Table.Td>
        <Anchor component={Link} to={`/namespaces/${name}`} fw={600}>
          {name}
        </Anchor>
        <Text size="xs" c="dimmed">
          {ns.description}
        </Text>
      </Table.Td>
      <Table.Td>
        {latest ? (
          <>
            <Anchor component={Link} to={`/namespaces/${name}/versions/${latest.number}`}>
              v{latest.number}
            </Anchor>
            <Text size="xs" c="dimmed">
              by {latest.createdBy}, {when(latest.createdAt)}
            </Text>
          </>
        ) : (
          <Text size="sm" c="dimmed">
            nothing published
          </Text>
        )}
      </Table.Td>
      <Table.Td>
        <Anchor component={Link} to={`/namespaces/${name}/changes`}>
          {open.data ? `${open.data.items?.length ?? 0} open` : '…'}
        </Anchor>
      </Table.Td>
      <Table.Td>
        {nodes.error ? (
          <Text size="sm" c="dimmed">
            unavailable
          </Text>
        ) : (
          <Anchor component={Link} to={`/namespaces/${name}/nodes`}>
            {fleetText(fleetCounts(nodes.data?.items ?? []), latest?.number)}
          </Anchor>
        )}
      </Table.Td>
    </Table.Tr>
  );
}

function CreateNamespace() {
  const create = useCreateNamespace();
  const navigate = useNavigate();
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name, description }, { onSuccess: (n) => navigate(`/namespaces/${n.name}`) });
  };
  const nameErr = create.error && 'fields' in create.error ? (create.error as { fields: { path?: string; message?: string }[] }).fields.find((f) => f.path === 'name')?.message : undefined;
  return (
    <Paper withBorder p="md" component="form" onSubmit={submit} aria-label="Create a namespace">
      <Stack gap="sm">
        <Title order={2} size="h4">
          Create a namespace
        </Title>
        <ErrorAlert error={create.error} />
        <Group align="flex-end" wrap="wrap">
          <TextInput label="Name" description="Lower-case letters, digits and dashes" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={nameErr} />
          <TextInput label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} style={{ flex: 1, minWidth: 200 }} />
          <Button type="submit" loading={create.isPending}>
            Create
          </Button>
        </Group>
      </Stack>
    </Paper>
  );
}

export function NamespacesPage() {
  const me = useMe();
  const nss = useNamespaces();
  const items = nss.data?.items ?? [];
  return (
    <Page title="Namespaces">
      {nss.isPending && <Loading />}
      <ErrorAlert error={nss.error} />
      {nss.data && items.length === 0 && <Text>No namespaces yet.{allows(me.data?.role, 'admin') ? ' Create the first one below.' : ' An admin creates them.'}</Text>}
      {items.length > 0 && (
        <Table.ScrollContainer minWidth={340}>
          <Table striped highlightOnHover aria-label="Namespaces" verticalSpacing="xs" horizontalSpacing="xs">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Namespace</Table.Th>
                <Table.Th>Published</Table.Th>
                <Table.Th>Changes</Table.Th>
                <Table.Th>Nodes</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((ns) => (
                <Row key={ns.name} ns={ns} />
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {allows(me.data?.role, 'admin') && <CreateNamespace />}
      <Group>
        <Badge variant="light">{plural(items.length, 'namespace')}</Badge>
      </Group>
    </Page>
  );
}

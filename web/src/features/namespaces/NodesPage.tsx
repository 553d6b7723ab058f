import { Badge, Table, Text } from '@mantine/core';
import { useParams } from 'react-router';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, when } from '../../components/Page';
import { useNodes } from './hooks';
import { NamespaceNav, nsCrumbs } from './NamespacePage';

export function NodesPage() {
  const ns = useParams().ns!;
  const nodes = useNodes(ns);
  const items = nodes.data?.items ?? [];
  return (
    <Page title="Nodes" crumbs={nsCrumbs(ns)} actions={<NamespaceNav ns={ns} />}>
      {nodes.isPending && <Loading />}
      <ErrorAlert error={nodes.error} />
      {nodes.data && items.length === 0 && <Text>No gateway node follows this namespace.</Text>}
      {items.length > 0 && (
        <Table.ScrollContainer minWidth={600}>
          <Table aria-label="Nodes">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Node</Table.Th>
                <Table.Th>State</Table.Th>
                <Table.Th>Version</Table.Th>
                <Table.Th>Applied</Table.Th>
                <Table.Th>Last error</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((n) => (
                <Table.Tr key={n.nodeId}>
                  <Table.Td>{n.nodeId}</Table.Td>
                  <Table.Td>{n.live ? <Badge color="green">live</Badge> : <Badge color="gray">gone {when(n.lastSeen)}</Badge>}</Table.Td>
                  <Table.Td>v{n.version}</Table.Td>
                  <Table.Td>{when(n.appliedAt)}</Table.Td>
                  <Table.Td>{n.lastApplyError}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </Page>
  );
}

import { Anchor, Stack, Text, Title } from '@mantine/core';
import { Link } from 'react-router';

export function NotFound() {
  return (
    <Stack>
      <Title order={1}>Not found</Title>
      <Text>There is no page here.</Text>
      <Anchor component={Link} to="/namespaces">
        Back to the namespaces
      </Anchor>
    </Stack>
  );
}

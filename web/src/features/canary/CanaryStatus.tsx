import { Anchor, Badge, Group, Text } from '@mantine/core';
import { Link } from 'react-router';
import { useCanary } from '../nodes/hooks';
import { analysisColor, canarySummary, type ActiveCanary } from './summary';

/**
 * CanaryStatus is the namespace's active canary in one line ("canary v7 on
 * 1 node (pool=canary), analysis: passing"), linked to the canary page
 * unless link is false; nothing when no canary runs. The badge's colour is
 * the analysis' (green passing, red breached).
 */
export function CanaryStatus({ ns, link = true }: { ns: string; link?: boolean }) {
  const canary: ActiveCanary | null | undefined = useCanary(ns, 5_000).data;
  if (!canary) return null;
  const text = canarySummary(canary);
  return (
    <Group gap={6} wrap="nowrap" role="status" aria-label="Canary">
      <Badge color={analysisColor(canary)} style={{ flexShrink: 0 }}>
        canary
      </Badge>
      <Text size="sm">
        {link ? (
          <Anchor component={Link} to={`/namespaces/${ns}/canary`}>
            {text}
          </Anchor>
        ) : (
          text
        )}
      </Text>
    </Group>
  );
}

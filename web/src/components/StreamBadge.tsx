import { Badge } from '@mantine/core';
import type { StreamState } from '../api/stream';

/** StreamBadge says whether the page follows the namespace's live stream. */
export function StreamBadge({ state }: { state: StreamState }) {
  const color = state === 'live' ? 'green' : state === 'connecting' ? 'gray' : 'yellow';
  return (
    <Badge color={color} variant="light" role="status" aria-label={`Stream ${state}`}>
      {state}
    </Badge>
  );
}

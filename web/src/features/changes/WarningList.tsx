import { List, Text, ThemeIcon } from '@mantine/core';
import type { Warning } from './summary';

/** WarningList shows risk flags (the server's api.Warnings), each with its code and path. */
export function WarningList({ warnings }: { warnings: Warning[] }) {
  return (
    <List size="sm" spacing={2}>
      {warnings.map((w, i) => (
        <List.Item
          key={i}
          icon={
            <ThemeIcon color="orange" size={16} radius="xl" aria-hidden>
              !
            </ThemeIcon>
          }
        >
          <Text span c="red.9" fw={600} size="sm">
            Risk:
          </Text>{' '}
          <Text span size="sm">
            {w.message}
          </Text>{' '}
          <Text span size="xs" c="dimmed" ff="monospace">
            ({w.code}
            {w.path ? ` at ${w.path}` : ''})
          </Text>
        </List.Item>
      ))}
    </List>
  );
}

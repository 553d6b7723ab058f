import { Button, Group, Modal, Stack } from '@mantine/core';
import type { ReactNode } from 'react';
import { ErrorAlert } from './ErrorAlert';

/**
 * ConfirmDialog asks before an action that reaches running nodes (drain,
 * clear an override, promote or abort a canary): its title names the
 * action, its body the scope (which nodes, which rules, what changes).
 * The dialog closes on success; on failure it stays open with the error.
 */
export function ConfirmDialog({ opened, title, confirm, color, loading, error, onConfirm, onClose, children }: {
  opened: boolean;
  title: string;
  confirm: string;
  color?: string;
  loading?: boolean;
  error?: unknown;
  onConfirm: () => void;
  onClose: () => void;
  children: ReactNode;
}) {
  return (
    <Modal opened={opened} onClose={onClose} title={title}>
      <Stack>
        {children}
        <ErrorAlert error={error} />
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            Cancel
          </Button>
          <Button color={color} loading={loading} onClick={onConfirm} data-autofocus>
            {confirm}
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}

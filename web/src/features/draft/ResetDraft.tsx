import { Button, Group, Modal, Stack, Text } from '@mantine/core';
import { useState } from 'react';
import { ErrorAlert } from '../../components/ErrorAlert';
import { useResetDraft } from './hooks';

/**
 * ResetDraftButton resets the namespace's draft to the newest version after
 * a confirmation that says what is dropped. etag, when given, is the draft
 * the user looks at (a newer save by someone else is then refused, 412);
 * without it, the draft as it is now.
 */
export function ResetDraftButton({ ns, version, etag, dropped, onDone, label = 'Reset draft to published' }: { ns: string; version: number; etag?: string; dropped: string; onDone: () => void; label?: string }) {
  const reset = useResetDraft(ns);
  const [open, setOpen] = useState(false);
  const target = version > 0 ? `published v${version}` : 'the empty rule set (nothing is published yet)';
  return (
    <>
      <Button variant="default" color="red" onClick={() => setOpen(true)}>
        {label}
      </Button>
      <Modal opened={open} onClose={() => setOpen(false)} title="Reset the draft?">
        <Stack>
          <Text size="sm">
            The draft becomes {target} again: {dropped} This is recorded in the audit log.
          </Text>
          <ErrorAlert error={reset.error} />
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setOpen(false)}>
              Keep the draft
            </Button>
            <Button
              color="red"
              loading={reset.isPending}
              onClick={() => {
                reset.mutate(etag, {
                  onSuccess: () => {
                    setOpen(false);
                    onDone();
                  },
                });
              }}
            >
              Reset to {version > 0 ? `v${version}` : 'empty'}
            </Button>
          </Group>
        </Stack>
      </Modal>
    </>
  );
}

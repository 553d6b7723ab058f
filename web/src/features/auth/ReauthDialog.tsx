import { Button, Group, Modal, PasswordInput, Stack, Text } from '@mantine/core';
import { useState } from 'react';
import { ErrorAlert } from '../../components/ErrorAlert';
import { useReauthenticate } from './session';

/**
 * ReauthDialog asks the signed-in user's password when their session
 * expired during a save (or any other mutation): signed in again, the
 * mutation is sent again (api/client.ts); cancelled, it fails with the
 * expiry and the page, with its unsaved edits, stays as it was.
 */
export function ReauthDialog({ opened, username, onDone }: { opened: boolean; username: string; onDone: (signedIn: boolean) => void }) {
  const login = useReauthenticate();
  const [password, setPassword] = useState('');
  const close = (ok: boolean) => {
    setPassword('');
    login.reset();
    onDone(ok);
  };
  return (
    <Modal opened={opened} onClose={() => close(false)} title="Your session has ended" zIndex={400} closeOnClickOutside={false}>
      <Stack
        component="form"
        aria-label="Sign in again"
        onSubmit={(e) => {
          e.preventDefault();
          login.mutate({ username, password }, { onSuccess: () => close(true) });
        }}
      >
        <Text size="sm">
          Sign in again as <b>{username}</b> to finish what you were doing: nothing you typed is lost, and it is sent again once you are signed in.
        </Text>
        <ErrorAlert error={login.error} />
        <PasswordInput label="Password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.currentTarget.value)} data-autofocus />
        <Group justify="flex-end">
          <Button variant="default" onClick={() => close(false)}>
            Cancel
          </Button>
          <Button type="submit" loading={login.isPending}>
            Sign in
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}

import { Anchor, AppShell, Burger, Button, Center, Group, Loader, Stack, Text } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { Link, Navigate, NavLink, Outlet, useLocation, useNavigate } from 'react-router';
import { setReauthHandler, setUnauthorizedHandler } from '../api/client';
import { keys } from '../api/keys';
import { ReauthDialog } from '../features/auth/ReauthDialog';
import { allows, useLogout, useMe } from '../features/auth/session';
import { ErrorAlert } from './ErrorAlert';

/** Layout is the signed-in shell: navigation, the user, and the sign-in guard. */
export function Layout() {
  const me = useMe();
  const qc = useQueryClient();
  const location = useLocation();
  const navigate = useNavigate();
  const logout = useLogout();
  const [opened, { toggle, close }] = useDisclosure(false);
  const [expired, setExpired] = useState(false);

  useEffect(() => {
    setUnauthorizedHandler(() => {
      if (qc.getQueryData(keys.me)) setExpired(true);
      qc.setQueryData(keys.me, null);
    });
    return () => setUnauthorizedHandler(() => {});
  }, [qc]);
  useEffect(close, [location.pathname, close]);
  // A mutation whose session expired asks the same user's password in a
  // dialog and is sent again (api/client.ts), instead of leaving the page.
  const username = me.data?.user.username;
  const [reauth, setReauth] = useState(false);
  const resolveReauth = useRef<((ok: boolean) => void) | null>(null);
  useEffect(() => {
    if (!username) return;
    setReauthHandler(
      () =>
        new Promise<boolean>((resolve) => {
          resolveReauth.current = resolve;
          setReauth(true);
        }),
    );
    return () => {
      setReauthHandler(null);
      resolveReauth.current?.(false);
      resolveReauth.current = null;
    };
  }, [username]);
  const reauthDone = (ok: boolean) => {
    resolveReauth.current?.(ok);
    resolveReauth.current = null;
    setReauth(false);
  };

  if (me.isPending) {
    return (
      <Center h="100vh">
        <Loader aria-label="Loading" />
      </Center>
    );
  }
  if (me.error) return <ErrorAlert error={me.error} />;
  if (!me.data) {
    const next = encodeURIComponent(location.pathname + location.search);
    return <Navigate to={`/login?next=${next}${expired ? '&expired=1' : ''}`} replace />;
  }
  const role = me.data.role;
  const links = [
    { to: '/namespaces', label: 'Namespaces', show: true },
    { to: '/audit', label: 'Audit', show: allows(role, 'approver') },
    { to: '/users', label: 'Users', show: allows(role, 'admin') },
    { to: '/tokens', label: 'API tokens', show: true },
  ].filter((l) => l.show);

  return (
    <>
      {/* The first thing a keyboard reaches: past the header and navigation to the page itself. */}
      <a href="#main" className="skip-link">
        Skip to content
      </a>
      <AppShell header={{ height: 56 }} navbar={{ width: 200, breakpoint: 'sm', collapsed: { mobile: !opened } }} padding="md">
        <AppShell.Header>
          <Group h="100%" px="md" justify="space-between" wrap="nowrap">
            <Group wrap="nowrap">
              <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Navigation" />
              <Anchor component={Link} to="/namespaces" fw={700} c="inherit" underline="never">
                Sluice
              </Anchor>
            </Group>
            <Group gap="xs" wrap="nowrap">
              <Text size="sm" visibleFrom="xs">
                {me.data.user.username} ({role})
              </Text>
              <Button
                variant="default"
                size="xs"
                onClick={() => logout.mutate(undefined, { onSettled: () => navigate('/login', { replace: true }) })}
              >
                Sign out
              </Button>
            </Group>
          </Group>
        </AppShell.Header>
        <AppShell.Navbar p="sm" aria-label="Main">
          <Stack gap={4}>
            {links.map((l) => (
              <Anchor key={l.to} component={NavLink} to={l.to} py={6} px={8}>
                {l.label}
              </Anchor>
            ))}
          </Stack>
        </AppShell.Navbar>
        <AppShell.Main id="main" tabIndex={-1} style={{ outline: 'none' }}>
          <Outlet />
        </AppShell.Main>
      </AppShell>
      <ReauthDialog opened={reauth} username={me.data.user.username ?? ''} onDone={reauthDone} />
    </>
  );
}

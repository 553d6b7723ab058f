import { Alert, Button, Container, Paper, PasswordInput, Stack, TextInput, Title } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { Navigate, useNavigate, useSearchParams } from 'react-router';
import { errorMessage } from '../../api/client';
import { useLogin, useMe } from './session';

/** safeNext keeps the return path on this site. */
function safeNext(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/login') ? next : '/namespaces';
}

export function LoginPage() {
  const [params] = useSearchParams();
  const next = safeNext(params.get('next'));
  const expired = params.get('expired') === '1';
  const me = useMe();
  const login = useLogin();
  const navigate = useNavigate();
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');

  if (me.data && !login.isPending) return <Navigate to={next} replace />;

  const submit = (e: FormEvent) => {
    e.preventDefault();
    login.mutate({ username, password }, { onSuccess: () => navigate(next, { replace: true }) });
  };

  return (
    <Container size={420} py={60}>
      <Title order={1} ta="center" mb="lg">
        Sluice
      </Title>
      <Paper withBorder p="lg" component="form" onSubmit={submit} aria-label="Sign in">
        <Stack>
          <Title order={2} size="h3">
            Sign in
          </Title>
          {expired && !login.error && <Alert color="yellow">Your session has ended. Sign in again to go back to where you were.</Alert>}
          {login.error && (
            <Alert color="red" role="alert">
              {errorMessage(login.error)}
            </Alert>
          )}
          <TextInput label="Username" autoComplete="username" required value={username} onChange={(e) => setUsername(e.currentTarget.value)} autoFocus />
          <PasswordInput label="Password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.currentTarget.value)} />
          <Button type="submit" loading={login.isPending}>
            Sign in
          </Button>
        </Stack>
      </Paper>
    </Container>
  );
}

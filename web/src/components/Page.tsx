import { Anchor, Breadcrumbs, Center, Loader, Stack, Title } from '@mantine/core';
import type { ReactNode } from 'react';
import { Link } from 'react-router';
import { absolute, relative } from './format';

/** Page is a titled page with breadcrumbs. */
export function Page({ title, crumbs, actions, children }: { title: ReactNode; crumbs?: { to: string; label: string }[]; actions?: ReactNode; children: ReactNode }) {
  return (
    <Stack gap="md" maw={1400}>
      {crumbs && crumbs.length > 0 && (
        <Breadcrumbs aria-label="Breadcrumbs">
          {crumbs.map((c) => (
            <Anchor key={c.to} component={Link} to={c.to} size="sm">
              {c.label}
            </Anchor>
          ))}
        </Breadcrumbs>
      )}
      <Stack gap="xs">
        <Title order={1} size="h2" style={{ wordBreak: 'break-word' }}>
          {title}
        </Title>
        {actions}
      </Stack>
      {children}
    </Stack>
  );
}

export function Loading() {
  return (
    <Center p="xl">
      <Loader aria-label="Loading" />
    </Center>
  );
}

/** when formats an API time for people: "2026-12-04 18:02 UTC", in the browser's zone. */
export function when(t?: string | null): string {
  return absolute(t);
}

/** When is a time in a table: relative ("5 min ago"), the absolute time on hover and for assistive tech. */
export function When({ t }: { t?: string | null }) {
  if (!t) return null;
  return (
    <time dateTime={t} title={absolute(t)} aria-label={absolute(t)}>
      {relative(t)}
    </time>
  );
}

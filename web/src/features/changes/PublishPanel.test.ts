// PublishPanel rendered to HTML (no DOM needed): a scheduled publish
// ("Publish at") is offered to every node only; the API refuses `at` with a
// canary (controlplane/http/rules.go, api/openapi.yaml), so a canary shows
// no such row, and a schedule already set can still be cancelled.
import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Change } from '../../api/client';
import { usePublish } from './hooks';
import { PublishPanel } from './PublishPanel';

function Panel({ c, scope }: { c: Change; scope: 'all' | 'canary' }) {
  const publish = usePublish('shop', c.id!);
  return createElement(PublishPanel, { ns: 'shop', c, lines: [], warnings: 0, newest: 3, publish, defaultScope: scope });
}

function html(c: Partial<Change>, scope: 'all' | 'canary'): string {
  const change = { id: 7, title: 'loosen', state: 'approved', ...c } as Change;
  return renderToStaticMarkup(createElement(QueryClientProvider, { client: new QueryClient() }, createElement(MantineProvider, null, createElement(Panel, { c: change, scope }))));
}

const publishAt = (h: string) => /<label[^>]*>Publish at<\/label>/.test(h);
const button = (h: string, name: string) => new RegExp(`<button[^>]*>(<[^>]*>)*${name}<`).test(h);

describe('the publish panel', () => {
  it('to every node: publish now, or at a time', () => {
    const h = html({}, 'all');
    expect(button(h, 'Publish')).toBe(true);
    expect(publishAt(h)).toBe(true);
    expect(button(h, 'Schedule')).toBe(true);
    expect(button(h, 'Cancel schedule')).toBe(false);
  });

  it('as a canary: no "Publish at" row (a canary cannot be scheduled)', () => {
    const h = html({}, 'canary');
    expect(button(h, 'Publish as a canary')).toBe(true);
    expect(publishAt(h)).toBe(false);
    expect(button(h, 'Schedule')).toBe(false);
    expect(button(h, 'Reschedule')).toBe(false);
  });

  it('a scheduled change: rescheduled or cancelled to every node; as a canary only cancelled', () => {
    const at = '2026-12-24T18:00:00Z';
    const all = html({ publishAt: at }, 'all');
    expect(publishAt(all)).toBe(true);
    expect(button(all, 'Reschedule')).toBe(true);
    expect(button(all, 'Cancel schedule')).toBe(true);
    const canary = html({ publishAt: at }, 'canary');
    expect(publishAt(canary)).toBe(false);
    expect(button(canary, 'Reschedule')).toBe(false);
    expect(button(canary, 'Cancel schedule')).toBe(true);
  });
});

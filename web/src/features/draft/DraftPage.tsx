import { Alert, Badge, Button, Group, List, Modal, Pagination, Paper, SegmentedControl, Select, Stack, Tabs, Text, Textarea, TextInput, Title } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { useBlocker, useNavigate, useParams } from 'react-router';
import { ApiError, type FieldError, type RuleSet } from '../../api/client';
import { keys } from '../../api/keys';
import { YamlEditor } from '../../components/code';
import { ErrorAlert } from '../../components/ErrorAlert';
import { Loading, Page, when } from '../../components/Page';
import { allows, useMe } from '../auth/session';
import { useCreateChange } from '../changes/hooks';
import { NamespaceNav, nsCrumbs } from '../namespaces/NamespacePage';
import { plural } from '../../components/format';
import { summarize, type Warning } from '../changes/summary';
import { WarningList } from '../changes/WarningList';
import { fetchDraft, saveDraft, useDebounced, useDraft, useDraftCheck, type DraftCheck, type LoadedDraft } from './hooks';
import { ResetDraftButton } from './ResetDraft';
import { dropLocalDraft, keepLocalDraft, localDraftKey, readLocalDraft, type LocalDraft } from './localDraft';
import { documentKindHelp, documentKinds } from './fields';
import { RuleForm } from './RuleForm';
import { ago, mergedNote, newerSave, reconcile, resolve, useDraftSaves, whoSaved, type Reconciled } from './collab';
import { ConflictDialog, SaveNotice } from './SaveConflict';
import { fromYaml, isService, lineOfPath, MaxYamlBytes, newRule, routeIds, ruleKinds, sameRuleSet, toYaml, withDocKind, withRule, type RuleKind } from './ruleset';

const pageSize = 10;
const kindTitle: Record<RuleKind, string> = { routes: 'Routes', identities: 'Identities', limits: 'Limits', classes: 'Classes', breakers: 'Breakers', degrades: 'Degrades' };
const kindOne: Record<RuleKind, string> = { routes: 'route', identities: 'identity', limits: 'limit', classes: 'class', breakers: 'breaker', degrades: 'degrade' };

export function DraftPage() {
  const ns = useParams().ns!;
  const draft = useDraft(ns);
  const [generation, setGeneration] = useState(0);
  const [note, setNote] = useState<string | null>(null);
  const reloaded = useCallback((n?: string) => {
    setNote(n ?? null);
    setGeneration((g) => g + 1);
  }, []);
  return (
    <Page title={`Draft of ${ns}`} crumbs={nsCrumbs(ns)} actions={<NamespaceNav ns={ns} />}>
      {draft.isPending && <Loading />}
      <ErrorAlert error={draft.error} />
      {draft.data && <DraftEditor key={generation} ns={ns} loaded={draft.data} note={note} onReloaded={reloaded} />}
    </Page>
  );
}

function DraftEditor({ ns, loaded, note: reloadNote, onReloaded }: { ns: string; loaded: LoadedDraft; note: string | null; onReloaded: (note?: string) => void }) {
  const me = useMe();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const canEdit = allows(me.data?.role, 'editor');
  const [base, setBase] = useState<RuleSet>(loaded.doc);
  const [etag, setEtag] = useState(loaded.etag);
  const [working, setWorking] = useState<RuleSet>(loaded.doc);
  const [view, setView] = useState<'form' | 'yaml'>('form');
  const [kind, setKind] = useState<RuleKind>('limits');
  const [filter, setFilter] = useState('');
  const [page, setPage] = useState(1);
  const [yamlText, setYamlText] = useState('');
  const [yamlBase, setYamlBase] = useState('');
  const [yamlError, setYamlError] = useState<{ message: string; line?: number } | null>(null);
  const [serverError, setServerError] = useState<unknown>(null);
  const [saving, setSaving] = useState(false);
  const [saved, setSaved] = useState(false);
  const [conflict, setConflict] = useState<Reconciled | null>(null);
  const [note, setNote] = useState<string | null>(reloadNote);
  // The server's document at an ETag (it normalizes, "1m" to "1m0s"): the
  // merge's base while the tab is at that ETag, else what the tab saved.
  const serverDoc = useRef<LoadedDraft>(loaded);
  const mergeBase = () => (serverDoc.current.etag === etag ? serverDoc.current.doc : base);
  const [changeOpen, setChangeOpen] = useState(false);
  // Edits in progress are kept in this browser until saved or discarded; a
  // kept draft that differs from the server's is offered back on open.
  const storeKey = localDraftKey(me.data?.user.username ?? '', ns);
  const [kept, setKept] = useState<LocalDraft | null>(() => {
    const k = canEdit ? readLocalDraft(localStorage, storeKey) : null;
    return k && !sameRuleSet(k.doc, loaded.doc) ? k : null;
  });

  const fieldErrors: FieldError[] = serverError instanceof ApiError ? serverError.fields : [];
  // Every edit makes a new object, so a reference check finds them; the
  // YAML view is compared with the text it was opened with.
  const dirty = working !== base || (view === 'yaml' && yamlText !== yamlBase);
  // Another save of this draft, announced by the stream: reloaded at once
  // when this tab has no unsaved edits, else offered to compare (merge).
  const latestSave = useDraftSaves(ns);
  const announced = newerSave(latestSave, etag, saving);
  useEffect(() => {
    if (!announced || dirty || conflict) return;
    let live = true;
    void fetchDraft(ns).then(
      (d) => {
        if (!live) return;
        qc.setQueryData(keys.draft(ns), d);
        onReloaded(`${announced.actor} saved the draft ${ago(announced.at)}; it was reloaded (you had no unsaved edits).`);
      },
      (e: unknown) => live && setServerError(e),
    );
    return () => {
      live = false;
    };
  }, [announced, dirty, conflict, ns, qc, onReloaded]);

  // The server checks what the user sees (the form's document, or the YAML
  // once it parses), 300 ms after the last edit: errors and risk flags per
  // field and in a summary, and the diff from the newest version.
  const yamlLater = useDebounced(view === 'yaml' ? yamlText : '', 300);
  const yamlDoc = useMemo(() => {
    if (view !== 'yaml' || !yamlLater) return null;
    const r = fromYaml(yamlLater);
    return r.ok ? r.ruleSet : null;
  }, [view, yamlLater]);
  const check = useDraftCheck(ns, !canEdit ? null : view === 'yaml' ? yamlDoc : working);
  const liveErrors: FieldError[] = check.fresh && view === 'form' ? (check.data?.errors ?? []) : [];
  // Risk flags at their field only when they are about what is shown.
  const warnings: Warning[] = check.fresh ? (check.data?.warnings ?? []) : [];
  const sameAsPublished = check.fresh && check.data?.diff !== undefined && changeCount(check.data) === 0;

  const blocker = useBlocker(({ currentLocation, nextLocation }) => dirty && currentLocation.pathname !== nextLocation.pathname);
  useEffect(() => {
    if (!dirty) return;
    const h = (e: BeforeUnloadEvent) => e.preventDefault();
    window.addEventListener('beforeunload', h);
    return () => window.removeEventListener('beforeunload', h);
  }, [dirty]);

  /** current is the document the user sees, parsed from the YAML view when it is open. */
  const current = (): RuleSet | null => {
    if (view !== 'yaml') return working;
    const r = fromYaml(yamlText);
    if (!r.ok) {
      setYamlError(r);
      return null;
    }
    setYamlError(null);
    // Parsed back to the saved draft: keep its reference, so it is not dirty.
    if (sameRuleSet(r.ruleSet, base)) setWorking(base);
    else if (!sameRuleSet(r.ruleSet, working)) setWorking(r.ruleSet);
    setYamlBase(yamlText);
    return r.ruleSet;
  };

  const switchView = (v: string) => {
    if (v === 'yaml') {
      const y = toYaml(working);
      setYamlText(y);
      setYamlBase(y);
      setYamlError(null);
      setView('yaml');
    } else {
      if (current()) setView('form');
    }
  };

  // One function for the page's life, reaching the current switchView: the
  // rule forms are memoized and keep the one they were given.
  const switchViewNow = useRef(switchView);
  useEffect(() => {
    switchViewNow.current = switchView;
  });
  const editInYaml = useCallback(() => switchViewNow.current('yaml'), []);

  const editing = view === 'yaml' ? yamlDoc : working;
  useEffect(() => {
    // Not while a kept draft waits to be restored or discarded: it would be overwritten.
    if (!canEdit || kept || !editing || editing === base) return;
    const t = setTimeout(() => keepLocalDraft(localStorage, storeKey, editing, etag), 300);
    return () => clearTimeout(t);
  }, [canEdit, kept, editing, base, etag, storeKey]);
  const discardKept = () => {
    dropLocalDraft(localStorage, storeKey);
    setKept(null);
  };

  const save = async (doc: RuleSet | null, ifMatch = etag, merged?: string): Promise<void> => {
    if (!doc) return;
    setSaving(true);
    setSaved(false);
    try {
      const next = await saveDraft(ns, ifMatch, doc);
      setEtag(next);
      setBase(doc);
      setWorking(doc);
      setServerError(null);
      setConflict(null);
      setSaved(true);
      setNote(merged ?? null);
      if (merged && view === 'yaml') {
        const y = toYaml(doc);
        setYamlText(y);
        setYamlBase(y);
      }
      dropLocalDraft(localStorage, storeKey);
      qc.setQueryData(keys.draft(ns), { doc, etag: next });
      void fetchDraft(ns).then((d) => d.etag === next && (serverDoc.current = d), () => undefined);
    } catch (e) {
      setServerError(e);
      if (e instanceof ApiError && e.status === 412) {
        // Merged from base with the server's draft: saved at once unless a field changed on both sides.
        try {
          const r = await reconcile(ns, mergeBase(), doc);
          if (r.merge.conflicts.length === 0) await save(r.merge.value, r.theirs.etag, mergedNote(whoSaved(r.theirs, latestSave), r.merge.theirs));
          else setConflict(r);
        } catch (e2) {
          setServerError(e2);
        }
      }
    } finally {
      setSaving(false);
    }
  };

  /** compare merges the announced save into the edits: left unsaved when nothing conflicts, else the dialog asks. */
  const compare = async () => {
    const doc = current();
    if (!doc) return;
    try {
      const r = await reconcile(ns, mergeBase(), doc);
      if (r.merge.conflicts.length > 0) return setConflict(r);
      serverDoc.current = r.theirs;
      setBase(r.theirs.doc);
      setEtag(r.theirs.etag);
      setWorking(r.merge.value);
      if (view === 'yaml') setView('form');
      setNote(`${mergedNote(whoSaved(r.theirs, latestSave), r.merge.theirs)} Save to keep your edits on top.`);
    } catch (e) {
      setServerError(e);
    }
  };

  const yamlErrors = useMemo(() => {
    if (view !== 'yaml') return [];
    const out = fieldErrors.map((e) => ({ line: e.line || lineOfPath(yamlText, e.path ?? '') || 1, message: `${e.path ? e.path + ': ' : ''}${e.message}` }));
    if (yamlError?.line) out.push({ line: yamlError.line, message: yamlError.message });
    return out;
    // yamlText is read when the errors arrive, not on every keystroke.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [view, fieldErrors, yamlError]);

  const rules = (working[kind] ?? []) as Record<string, unknown>[];
  const shown = rules.map((r, i) => ({ r, i })).filter(({ r }) => !filter || String(r.id ?? '').includes(filter));
  const pages = Math.max(1, Math.ceil(shown.length / pageSize));
  const ids = routeIds(working);
  const classIds = (working.classes ?? []).map((c) => c.id);
  const service = isService(working);
  const errorKinds = new Set([...fieldErrors, ...liveErrors].map((e) => e.path?.split('[')[0]));

  return (
    <Stack gap="md">
      <Group justify="space-between" wrap="wrap">
        <SegmentedControl
          value={view}
          onChange={switchView}
          data={[
            { value: 'form', label: 'Form' },
            { value: 'yaml', label: 'YAML' },
          ]}
          aria-label="View"
        />
        <Group gap="xs" wrap="wrap">
          {dirty ? <Badge color="yellow">Unsaved changes</Badge> : saved ? <Badge color="green">Saved</Badge> : null}
          {canEdit && (
            <>
              <Button onClick={() => save(current())} loading={saving} disabled={!dirty}>
                Save draft
              </Button>
              <Button
                variant="light"
                onClick={() => setChangeOpen(true)}
                disabled={dirty || sameAsPublished}
                title={dirty ? 'Save the draft first' : sameAsPublished ? `The draft equals published v${check.data?.version}: nothing to propose` : undefined}
              >
                Open a change
              </Button>
            </>
          )}
        </Group>
      </Group>
      {note && (
        <Alert color="blue" role="status" withCloseButton onClose={() => setNote(null)} aria-label="Merge">
          {note}
        </Alert>
      )}
      {announced && dirty && !conflict && (
        <SaveNotice
          save={announced}
          onCompare={() => void compare()}
          onReload={() => {
            dropLocalDraft(localStorage, storeKey);
            void fetchDraft(ns).then((d) => {
              qc.setQueryData(keys.draft(ns), d);
              onReloaded(`Reloaded ${announced.actor}'s save; your edits were dropped.`);
            }, setServerError);
          }}
        />
      )}
      {!canEdit && <Alert color="gray">You can read this draft; editing needs the editor role.</Alert>}
      {kept && (
        <Alert color="blue" title={`Unsaved edits from ${when(kept.at)} were kept in this browser`}>
          <Text size="sm" mb="xs">
            They were not saved (the session may have ended, or the tab closed). Restore them to review and save, or discard them.
          </Text>
          <Group>
            <Button
              size="xs"
              onClick={() => {
                if (view === 'yaml') setView('form');
                setWorking(kept.doc);
                setKept(null);
              }}
            >
              Restore my edits
            </Button>
            <Button size="xs" variant="default" onClick={discardKept}>
              Discard them
            </Button>
          </Group>
        </Alert>
      )}
      {check.data && (
        <DraftState
          ns={ns}
          check={check.data}
          doc={view === 'yaml' ? yamlDoc : working}
          etag={etag}
          checking={!check.fresh}
          canEdit={canEdit}
          dirty={dirty}
          onReset={() => {
            dropLocalDraft(localStorage, storeKey);
            onReloaded();
          }}
        />
      )}
      {serverError !== null && !(serverError instanceof ApiError && serverError.status === 412) && <ErrorAlert error={serverError} title="The server refused the draft" />}
      {yamlError && (
        <Alert color="red" role="alert" title="The YAML does not parse">
          {yamlError.line ? `line ${yamlError.line}: ` : ''}
          {yamlError.message}
        </Alert>
      )}

      {view === 'form' ? (
        <Stack gap="sm">
          <Select
            label="Document kind"
            description={documentKindHelp}
            data={documentKinds.map((k) => ({ value: k, label: k === 'service' ? 'service (in-service SDK)' : 'gateway (default)' }))}
            value={working.kind ?? 'gateway'}
            allowDeselect={false}
            readOnly={!canEdit}
            disabled={!canEdit}
            maw={720}
            onChange={(k) => k && k !== (working.kind ?? 'gateway') && setWorking((w) => withDocKind(w, k))}
          />
          <Tabs value={kind} onChange={(k) => { setKind((k as RuleKind) ?? 'limits'); setPage(1); }} keepMounted={false}>
            <Tabs.List>
              {ruleKinds.map((k) => (
                <Tabs.Tab key={k} value={k} color={errorKinds.has(k) ? 'red' : undefined}>
                  {kindTitle[k]} ({((working[k] ?? []) as unknown[]).length})
                </Tabs.Tab>
              ))}
            </Tabs.List>
            <Stack gap="sm" pt="sm">
              <Group wrap="wrap">
                <TextInput label={`Filter ${kindTitle[kind].toLowerCase()} by id`} value={filter} onChange={(e) => { setFilter(e.currentTarget.value); setPage(1); }} />
                {canEdit && !(service && kind === 'identities') && (
                  <Button
                    mt="lg"
                    variant="default"
                    onClick={() => {
                      setWorking((w) => ({ ...w, [kind]: [...((w[kind] ?? []) as unknown[]), newRule(w, kind)] }) as RuleSet);
                      setFilter('');
                      setPage(Math.ceil((rules.length + 1) / pageSize));
                    }}
                  >
                    Add {kindOne[kind]}
                  </Button>
                )}
              </Group>
              {service && kind === 'identities' && <Alert color="gray">A kind: service document has no identities: the SDK verifies no tokens.</Alert>}
              {service && kind === 'routes' && <Text size="sm" c="dimmed">In a kind: service document a route has no upstream: it names requests the service&apos;s own handlers answer, which the SDK&apos;s HTTP middleware guards.</Text>}
              {shown.length === 0 && <Text c="dimmed">No {kindTitle[kind].toLowerCase()}.</Text>}
              {shown.slice((page - 1) * pageSize, page * pageSize).map(({ r, i }) => (
                <RuleForm
                  key={`${kind}-${i}`}
                  kind={kind}
                  index={i}
                  rule={r}
                  routeIds={ids}
                  classIds={classIds}
                  service={service}
                  errors={[...fieldErrors, ...liveErrors]}
                  warnings={warnings}
                  readOnly={!canEdit}
                  onChange={(nr) => setWorking((w) => withRule(w, kind, i, () => nr))}
                  onRemove={() => setWorking((w) => withRule(w, kind, i, () => undefined))}
                  onEditYaml={editInYaml}
                />
              ))}
              {pages > 1 && <Pagination total={pages} value={page} onChange={setPage} aria-label="Pages" />}
            </Stack>
          </Tabs>
        </Stack>
      ) : (
        <YamlEditor
          label="Draft YAML"
          value={yamlText}
          onChange={setYamlText}
          readOnly={!canEdit}
          errors={yamlErrors}
          maxBytes={MaxYamlBytes}
          onRefused={(m) => setYamlError({ message: m })}
        />
      )}

      <ConflictDialog
        conflict={conflict}
        who={conflict ? whoSaved(conflict.theirs, latestSave) : ''}
        saving={saving}
        onClose={() => setConflict(null)}
        onLoadTheirs={() => {
          dropLocalDraft(localStorage, storeKey);
          if (conflict) qc.setQueryData(keys.draft(ns), conflict.theirs);
          onReloaded();
        }}
        onSave={(choices) => conflict && void save(resolve(conflict, choices), conflict.theirs.etag, `Saved, merged with ${whoSaved(conflict.theirs, latestSave)}'s save.`)}
      />

      <OpenChange ns={ns} opened={changeOpen} check={check.data} doc={working} onClose={() => setChangeOpen(false)} onOpened={(id) => navigate(`/namespaces/${ns}/changes/${id}`)} />

      <Modal opened={blocker.state === 'blocked'} onClose={() => blocker.reset?.()} title="Leave without saving?">
        <Stack>
          <Text>The draft has unsaved changes. They are lost if you leave this page.</Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => blocker.reset?.()}>
              Stay
            </Button>
            <Button
              color="red"
              onClick={() => {
                dropLocalDraft(localStorage, storeKey);
                blocker.proceed?.();
              }}
            >
              Leave without saving
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}

/** changeCount is how many rules the checked document changes against the newest version. */
function changeCount(c: DraftCheck): number {
  return (c.diff?.added ?? 0) + (c.diff?.removed ?? 0) + (c.diff?.changed ?? 0) + (c.diff?.namespace ? 1 : 0);
}

/** DiffSummary lists what a checked document changes, rule by rule, with the risk flags at their rule. */
function DiffSummary({ check, doc }: { check: DraftCheck; doc: RuleSet | null }) {
  const { lines, general } = useMemo(() => summarize(check.diff, check.warnings as Warning[], doc ?? undefined), [check, doc]);
  return (
    <Stack gap={4}>
      {general.length > 0 && <WarningList warnings={general} />}
      <List spacing={4} aria-label="Changes from the published version">
        {lines.map((l, i) => (
          <List.Item key={i}>
            <Text ff="monospace" size="sm">
              {l.text}
            </Text>
            {l.warnings.length > 0 && <WarningList warnings={l.warnings} />}
          </List.Item>
        ))}
      </List>
    </Stack>
  );
}

/**
 * DraftState says how the draft the user sees differs from the newest
 * version (with the diff and the risk flags), or that it does not, and
 * offers to reset it to that version.
 */
function DraftState({ ns, check, doc, etag, checking, canEdit, dirty, onReset }: { ns: string; check: DraftCheck; doc: RuleSet | null; etag: string; checking: boolean; canEdit: boolean; dirty: boolean; onReset: () => void }) {
  const v = check.version;
  const published = v > 0 ? `published v${v}` : 'the empty rule set (nothing is published yet)';
  if ((check.errors ?? []).length > 0) {
    return (
      <Alert color="red" title={`The draft does not validate: ${plural(check.errors.length, 'problem')}`} aria-label="Draft state">
        <Text size="sm">Each is shown at its field; a change cannot be opened from it.</Text>
      </Alert>
    );
  }
  const n = changeCount(check);
  if (n === 0) {
    return (
      <Text size="sm" c="dimmed" role="status" aria-label="Draft state">
        The draft equals {published}.
      </Text>
    );
  }
  return (
    <Paper withBorder p="sm" component="section" aria-label="Draft state" aria-busy={checking} style={checking ? { opacity: 0.6 } : undefined}>
      <Group justify="space-between" wrap="wrap" mb="xs">
        <Title order={2} size="h5">
          Draft differs from {published}: {plural(n, 'change')}
          {check.warnings.length > 0 ? `, ${plural(check.warnings.length, 'risk flag')}` : ''}
        </Title>
        {canEdit && (
          <ResetDraftButton
            ns={ns}
            version={v}
            etag={etag}
            dropped={`${plural(n, 'change')} ${dirty ? '(and your unsaved edits) ' : ''}are dropped.`}
            onDone={onReset}
          />
        )}
      </Group>
      <DiffSummary check={check} doc={doc} />
    </Paper>
  );
}

function OpenChange({ ns, opened, check, doc, onClose, onOpened }: { ns: string; opened: boolean; check?: DraftCheck; doc: RuleSet; onClose: () => void; onOpened: (id: number) => void }) {
  const create = useCreateChange(ns);
  const [title, setTitle] = useState('');
  const [description, setDescription] = useState('');
  return (
    <Modal opened={opened} onClose={onClose} title="Open a change" size="lg">
      <Stack component="form" onSubmit={(e) => { e.preventDefault(); create.mutate({ title, description }, { onSuccess: (c) => onOpened(c.id!) }); }}>
        <Title order={3} size="h5">
          Propose the saved draft for review
        </Title>
        {check && (
          <Paper withBorder p="sm" aria-label="What the change does">
            <Text size="sm" fw={600} mb={4}>
              Against {check.version > 0 ? `v${check.version}` : 'nothing published'}: {plural(changeCount(check), 'change')}
              {check.warnings.length > 0 ? `, ${plural(check.warnings.length, 'risk flag')} an approver must confirm` : ''}
            </Text>
            <DiffSummary check={check} doc={doc} />
          </Paper>
        )}
        <ErrorAlert error={create.error} />
        <TextInput label="Title" required value={title} onChange={(e) => setTitle(e.currentTarget.value)} maxLength={200} data-autofocus />
        <Textarea label="Description" autosize minRows={3} value={description} onChange={(e) => setDescription(e.currentTarget.value)} />
        <Group justify="flex-end">
          <Button type="submit" loading={create.isPending}>
            Open change
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}

import { Button, Checkbox, Group, List, MultiSelect, NumberInput, Paper, Select, SimpleGrid, Stack, TagsInput, Text, Textarea, TextInput } from '@mantine/core';
import { memo, useState, type ReactNode } from 'react';
import type { FieldError } from '../../api/client';
import { choiceOf, claimsToTags, editValue, helpOf, ratiosToTags, tagsToClaims, tagsToInts, tagsToRatios, uncovered, visibleFields, type Ctx, type FieldSpec } from './fields';
import { getIn, setIn, type RuleKind } from './ruleset';
import type { Warning } from '../changes/summary';

type Props = {
  kind: RuleKind;
  index: number;
  rule: Record<string, unknown>;
  routeIds: string[];
  /** classIds are the document's priority classes, for a degrade plan's shed order. */
  classIds?: string[];
  /** service: the document is kind: service (routes without upstream, rules naming resources). */
  service?: boolean;
  errors: FieldError[];
  /** warnings are the server's risk flags of the whole draft; those of this rule (path "kind[id]…") show at their field. */
  warnings?: Warning[];
  readOnly: boolean;
  onChange: (r: Record<string, unknown>) => void;
  onRemove: () => void;
  /** onEditYaml switches to the YAML view, where what the form cannot edit is edited. */
  onEditYaml?: () => void;
};

const kindLabel: Record<RuleKind, string> = { routes: 'Route', identities: 'Identity', limits: 'Limit', classes: 'Class', breakers: 'Breaker', degrades: 'Degrade' };

/**
 * Folded is a section of a rule's fields that starts folded unless open;
 * its fields are made only once it is first unfolded, so that a page of
 * rules with their optional sections folded (cost, TLS, health check,
 * adaptive settings, …) costs the browser only the fields it shows.
 */
function Folded({ title, open, children }: { title: string; open: boolean; children: () => ReactNode }) {
  const [unfolded, setUnfolded] = useState(false);
  return (
    <details open={open} onToggle={(e) => e.currentTarget.open && setUnfolded(true)}>
      <Text component="summary" size="sm" fw={600} style={{ cursor: 'pointer' }}>
        {title}
      </Text>
      {(open || unfolded) && <div style={{ paddingTop: 'var(--mantine-spacing-xs)' }}>{children()}</div>}
    </details>
  );
}

/** under says whether path is want or a field below it. */
const under = (path: string | undefined, want: string) => path === want || !!path?.startsWith(want + '.') || !!path?.startsWith(want + '[');

/** errorAt is the server's message for a field (full path, "limits[2].rate"), with its path. */
function errorAt(errors: FieldError[], want: string): string | undefined {
  const e = errors.find((x) => under(x.path, want));
  return e ? `${e.path}: ${e.message}` : undefined;
}

/** warningAt is the risk flag of a field, by any of its paths (api.Warnings names rules and tiers by id). */
function warningAt(warnings: Warning[], wants: string[]): Warning | undefined {
  return warnings.find((w) => wants.some((want) => under(w.path, want)));
}

type FieldProps = {
  kind: RuleKind;
  f: FieldSpec;
  helpPath?: string;
  value: unknown;
  error?: string;
  warning?: Warning;
  readOnly: boolean;
  routeIds: string[];
  classIds: string[];
  onValue: (v: unknown) => void;
  id: string;
};

type Common = { label: string; description: ReactNode; error?: string; readOnly: boolean; disabled: boolean; id: string };

function Field({ kind, f, helpPath, value, error, warning, readOnly, routeIds, classIds, onValue, id }: FieldProps) {
  const help = helpOf(kind, helpPath ? { ...f, path: helpPath } : f);
  const description = warning ? (
    <>
      {help && <span style={{ display: 'block' }}>{help}</span>}
      <Text span size="xs" c="red.9" fw={600} style={{ display: 'block' }}>
        Risk: {warning.message}
      </Text>
    </>
  ) : (
    help
  );
  const common: Common = { label: f.label, description, error, readOnly, disabled: readOnly, id };
  const list = (value as string[]) ?? [];
  switch (f.type) {
    case 'number':
      return (
        <NumberInput
          {...common}
          value={typeof value === 'number' ? value : value === undefined ? '' : String(value)}
          onChange={(v) => onValue(v === '' ? undefined : typeof v === 'number' ? v : Number(v))}
          allowDecimal
          placeholder={f.placeholder}
        />
      );
    case 'select':
      // Absent, a field with a default shows it (the server's value), marked; picking it again (a deselect) keeps it absent.
      return (
        <Select
          {...common}
          data={[...new Set([...(f.options ?? []), ...(value !== undefined ? [String(value)] : [])])].map((o) => ({ value: o, label: o === f.default ? `${o} (default)` : o }))}
          value={value !== undefined ? String(value) : (f.default ?? null)}
          onChange={(v) => onValue(v ?? undefined)}
          clearable={!f.required && value !== undefined}
          placeholder={f.placeholder}
        />
      );
    case 'oneof':
      return (
        <Select
          {...common}
          data={(f.choices ?? []).map((c) => ({ value: c.value, label: c.label }))}
          value={choiceOf(f, value)}
          allowDeselect={false}
          onChange={(v) => {
            const c = f.choices?.find((x) => x.value === v);
            if (c && v !== choiceOf(f, value)) onValue(c.init);
          }}
        />
      );
    case 'tags':
      return <TagsInput {...common} value={list} onChange={(v) => onValue(v)} placeholder={list.length > 0 ? undefined : f.placeholder} />;
    case 'multiselect':
      return <MultiSelect {...common} data={[...new Set([...(f.options ?? []), ...list])]} value={list} onChange={(v) => onValue(v)} />;
    case 'claims':
      return <ParsedTags common={common} value={value} onValue={onValue} placeholder={f.placeholder ?? 'plan=pro'} toTags={claimsToTags} fromTags={(t) => ({ value: tagsToClaims(t).claims, bad: tagsToClaims(t).bad })} hint="One name=value per entry (Enter after each)." badText={(b) => `write name=value: ${b} has no name`} />;
    case 'ratios':
      return <ParsedTags common={common} value={value} onValue={onValue} placeholder={f.placeholder} toTags={ratiosToTags} fromTags={tagsToRatios} hint="One class=share per entry (Enter after each)." badText={(b) => `write class=share: ${b} is not a class id and a number`} />;
    case 'numtags':
      return (
        <ParsedTags
          common={common}
          value={value}
          onValue={onValue}
          placeholder={f.placeholder}
          toTags={(v) => (Array.isArray(v) ? v.map(String) : [])}
          fromTags={tagsToInts}
          badText={(b) => `${b}: not a whole number`}
        />
      );
    case 'routes':
    case 'classes': {
      const ids = f.type === 'routes' ? routeIds : classIds;
      return (
        <MultiSelect
          {...common}
          description={common.description ?? (f.type === 'routes' ? 'Empty means every route.' : undefined)}
          data={[...new Set([...ids, ...list])]}
          value={list}
          onChange={(v) => onValue(v)}
          searchable
          limit={50}
        />
      );
    }
    case 'bool':
      return <Checkbox {...common} mt="lg" checked={!!value} onChange={(e) => onValue(e.currentTarget.checked || undefined)} />;
    case 'textarea':
      return <Textarea {...common} value={value === undefined ? '' : String(value)} onChange={(e) => onValue(e.currentTarget.value)} placeholder={f.placeholder} autosize minRows={2} maxRows={10} />;
    case 'json':
      return <JsonField common={common} value={value} onValue={onValue} placeholder={f.placeholder} />;
    default:
      return <TextInput {...common} value={value === undefined ? '' : String(value)} onChange={(e) => onValue(e.currentTarget.value)} placeholder={f.placeholder} />;
  }
}

type ParsedTagsProps = {
  common: Common;
  value: unknown;
  onValue: (v: unknown) => void;
  placeholder?: string;
  toTags: (v: unknown) => string[];
  fromTags: (tags: string[]) => { value: Record<string, unknown> | unknown[]; bad: string[] };
  hint?: string;
  /** badText is the message for the entries that do not parse, given them quoted and joined. */
  badText: (bad: string) => string;
};

/** ParsedTags edits a map or list as entries ("name=value", "503"); an entry that does not parse is refused with a message and left out. */
function ParsedTags({ common, value, onValue, placeholder, toTags, fromTags, hint, badText }: ParsedTagsProps) {
  const [bad, setBad] = useState<string[]>([]);
  const tags = toTags(value);
  const local = bad.length > 0 ? badText(bad.map((b) => JSON.stringify(b)).join(', ')) : undefined;
  return (
    <TagsInput
      {...common}
      description={
        hint ? (
          <>
            {common.description}
            <span style={{ display: 'block' }}>{hint}</span>
          </>
        ) : (
          common.description
        )
      }
      error={common.error ?? local}
      placeholder={tags.length > 0 ? undefined : placeholder}
      value={tags}
      onChange={(tags) => {
        const r = fromTags(tags);
        setBad(r.bad);
        onValue(Object.keys(r.value).length > 0 ? r.value : undefined);
      }}
    />
  );
}

/** JsonField edits any JSON value (a degrade fallback's body); text that does not parse is kept on screen, flagged, and not written. */
function JsonField({ common, value, onValue, placeholder }: { common: Common; value: unknown; onValue: (v: unknown) => void; placeholder?: string }) {
  // local is what the user typed and the value it gave (or that was there when it did not parse): shown while the value is still that one.
  const [local, setLocal] = useState<{ text: string; of: string | undefined; bad: string | null } | null>(null);
  const now = JSON.stringify(value);
  const text = local && local.of === now ? local.text : value === undefined ? '' : JSON.stringify(value, null, 2);
  return (
    <Textarea
      {...common}
      error={common.error ?? (local && local.of === now && local.bad ? `not JSON: ${local.bad}` : undefined)}
      value={text}
      placeholder={placeholder}
      autosize
      minRows={2}
      maxRows={10}
      ff="monospace"
      onChange={(e) => {
        const t = e.currentTarget.value;
        if (t.trim() === '') {
          setLocal({ text: t, of: undefined, bad: null });
          onValue(undefined);
          return;
        }
        try {
          const v: unknown = JSON.parse(t);
          setLocal({ text: t, of: JSON.stringify(v), bad: null });
          onValue(v);
        } catch (err) {
          setLocal({ text: t, of: now, bad: err instanceof Error ? err.message : String(err) });
        }
      }}
    />
  );
}

/** show writes a value the form does not edit, short. */
function show(v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 120 ? s.slice(0, 117) + '…' : s;
}

/** Block is a run of fields shown together: a grid (of one section, or of none) or a list of objects. */
type Block = { section?: string; fields: FieldSpec[]; list?: FieldSpec };

function blocksOf(shown: FieldSpec[]): Block[] {
  const out: Block[] = [];
  for (const f of shown) {
    const last = out[out.length - 1];
    if (f.type === 'list') out.push({ fields: [], list: f });
    else if (last && !last.list && last.section === f.section) last.fields.push(f);
    else out.push({ section: f.section, fields: [f] });
  }
  return out;
}

/** RuleForm is the form of one rule; server errors show at their field with the field path. */
function RuleFormFields({ kind, index, rule, routeIds, classIds = [], service = false, errors, warnings = [], readOnly, onChange, onRemove, onEditYaml }: Props) {
  const prefix = `${kind}[${index}]`;
  const id = String(rule.id ?? '');
  const ctx: Ctx = { service };
  const shown = visibleFields(kind, rule, ctx);
  const placed = (e: FieldError) => shown.some((f) => under(e.path, `${prefix}.${f.path}`));
  const other = errors.filter((e) => under(e.path, prefix) && !placed(e));
  const extras = uncovered(rule, shown, ctx);
  const fieldOf = (f: FieldSpec) => (
    <Field
      key={f.path}
      id={`${prefix}.${f.path}`}
      kind={kind}
      f={f}
      value={getIn(rule, f.path)}
      error={errorAt(errors, `${prefix}.${f.path}`)}
      warning={warningAt(warnings, [`${kind}[${id}].${f.path}`, `${prefix}.${f.path}`])}
      readOnly={readOnly}
      routeIds={routeIds}
      classIds={classIds}
      onValue={(v) => onChange(editValue(rule, f, v))}
    />
  );
  const grid = (fs: FieldSpec[]) => (
    <SimpleGrid cols={{ base: 1, sm: 2, lg: 3 }} spacing="sm">
      {fs.map(fieldOf)}
    </SimpleGrid>
  );
  return (
    <Paper withBorder p="sm" component="fieldset" aria-label={`${kindLabel[kind]} ${id}`} style={{ minWidth: 0 }}>
      <Group justify="space-between" mb="xs">
        <Text fw={600} component="legend" px={4}>
          {kindLabel[kind]} {id}
        </Text>
        {!readOnly && (
          <Button variant="subtle" color="red" size="xs" onClick={onRemove} aria-label={`Remove ${kindLabel[kind].toLowerCase()} ${id}`}>
            Remove
          </Button>
        )}
      </Group>
      <Stack gap="xs">
        {blocksOf(shown).map((b, k) => {
          if (b.list) {
            const lf = b.list;
            return (
              <ObjectList
                key={lf.path}
                kind={kind}
                f={lf}
                prefix={prefix}
                ruleId={id}
                rule={rule}
                ctx={ctx}
                errors={errors}
                warnings={warnings}
                readOnly={readOnly}
                routeIds={routeIds}
                classIds={classIds}
                onChange={(items) => onChange(setIn(rule, lf.path, items))}
              />
            );
          }
          if (!b.section) return <div key={k}>{grid(b.fields)}</div>;
          // A section is folded until one of its fields is set or has an error.
          const open = b.fields.some((f) => getIn(rule, f.path) !== undefined || errorAt(errors, `${prefix}.${f.path}`) !== undefined);
          const fs = b.fields;
          return (
            <Folded key={k} title={b.section} open={open}>
              {() => grid(fs)}
            </Folded>
          );
        })}
      </Stack>
      {extras.length > 0 && (
        <Stack gap={2} mt="xs">
          <Group gap="xs">
            <Text size="xs" c="dimmed" id={`${prefix}-extras`}>
              Set in YAML (this form does not edit them; they are kept as they are):
            </Text>
            {onEditYaml && (
              <Button size="compact-xs" variant="light" onClick={onEditYaml} aria-label={`Edit ${kindLabel[kind].toLowerCase()} ${id} in YAML`}>
                Edit in YAML
              </Button>
            )}
          </Group>
          <List size="xs" aria-labelledby={`${prefix}-extras`}>
            {extras.map(([p, v]) => (
              <List.Item key={p}>
                <Text span size="xs" ff="monospace">
                  {p}: {show(v)}
                </Text>
              </List.Item>
            ))}
          </List>
        </Stack>
      )}
      {other.map((e, i) => (
        <Text key={i} c="red" size="sm" mt="xs" role="alert">
          {e.path}: {e.message} (edit it in the YAML view)
        </Text>
      ))}
    </Paper>
  );
}

type ObjectListProps = {
  kind: RuleKind;
  f: FieldSpec;
  prefix: string;
  ruleId: string;
  rule: Record<string, unknown>;
  ctx: Ctx;
  errors: FieldError[];
  warnings: Warning[];
  readOnly: boolean;
  routeIds: string[];
  classIds: string[];
  onChange: (items: Record<string, unknown>[] | undefined) => void;
};

/** ObjectList edits a list of objects (tiers, targets, variants): each element its own fieldset, in order. */
function ObjectList({ kind, f, prefix, ruleId, rule, ctx, errors, warnings, readOnly, routeIds, classIds, onChange }: ObjectListProps) {
  const items = (Array.isArray(getIn(rule, f.path)) ? getIn(rule, f.path) : []) as Record<string, unknown>[];
  const label = f.itemLabel ?? 'Item';
  const help = helpOf(kind, f) ?? helpOf(kind, { ...f, path: `${f.path}[0]` });
  const set = (j: number, t: Record<string, unknown> | undefined) => {
    const next = [...items];
    if (t === undefined) next.splice(j, 1);
    else next[j] = t;
    onChange(next.length > 0 ? next : undefined);
  };
  const lp = `${prefix}.${f.path}`;
  const own = errors.filter((e) => e.path === lp);
  return (
    <Stack gap="xs" mt="xs">
      <Group justify="space-between">
        <div>
          <Text fw={600} size="sm">
            {f.label} ({items.length})
          </Text>
          {help && (
            <Text size="xs" c="dimmed">
              {help}
            </Text>
          )}
        </div>
        {!readOnly && f.newItem && (
          <Button size="xs" variant="default" onClick={() => onChange([...items, f.newItem!(rule)])} aria-label={`Add ${label.toLowerCase()} to ${ruleId}`}>
            Add {label.toLowerCase()}
          </Button>
        )}
      </Group>
      {own.map((e, i) => (
        <Text key={i} c="red" size="sm" role="alert">
          {e.path}: {e.message}
        </Text>
      ))}
      {items.map((t, j) => {
        const tp = `${lp}[${j}]`;
        const tid = t.id === undefined ? String(j + 1) : String(t.id);
        const sub = visibleFields(kind, t, { ...ctx, parent: rule }, f.item ?? []);
        const placed = (e: FieldError) => sub.some((x) => under(e.path, `${tp}.${x.path}`));
        const rest = errors.filter((e) => under(e.path, tp) && !placed(e));
        return (
          <Paper key={j} withBorder p="xs" component="fieldset" aria-label={`${label} ${tid}`} style={{ minWidth: 0 }}>
            <Group justify="space-between" mb={4}>
              <Text size="sm" fw={600} component="legend" px={4}>
                {label} {j + 1}
                {t.id === undefined ? '' : `: ${tid}`}
              </Text>
              {!readOnly && (
                <Button variant="subtle" color="red" size="xs" onClick={() => set(j, undefined)} aria-label={`Remove ${label.toLowerCase()} ${tid}`}>
                  Remove
                </Button>
              )}
            </Group>
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 3 }} spacing="sm">
              {sub.map((x) => (
                <Field
                  key={x.path}
                  id={`${tp}.${x.path}`}
                  kind={kind}
                  f={x}
                  helpPath={`${f.path}[0].${x.path}`}
                  value={getIn(t, x.path)}
                  error={errorAt(errors, `${tp}.${x.path}`)}
                  warning={warningAt(warnings, [`${kind}[${ruleId}].${f.path}[${tid}].${x.path}`, `${tp}.${x.path}`])}
                  readOnly={readOnly}
                  routeIds={routeIds}
                  classIds={classIds}
                  onValue={(v) => set(j, editValue(t, x, v))}
                />
              ))}
            </SimpleGrid>
            {rest.map((e, i) => (
              <Text key={i} c="red" size="sm" mt="xs" role="alert">
                {e.path}: {e.message}
              </Text>
            ))}
          </Paper>
        );
      })}
    </Stack>
  );
}

/** sameItems says whether two lists hold the same items (by reference), in order. */
function sameItems<T>(a: readonly T[] | undefined, b: readonly T[] | undefined): boolean {
  if (a === b) return true;
  if (!a || !b || a.length !== b.length) return false;
  return a.every((x, i) => x === b[i]);
}

/**
 * RuleForm is one rule's form. An edit makes a new object of the edited
 * rule only, so a page of rules re-renders only the form whose rule (or
 * whose errors, flags, route or class ids) changed. onChange and onRemove
 * are not compared: the page's are functional updates of the rule at
 * (kind, index), which are compared. onEditYaml must be stable (the page
 * keeps one for its life).
 */
export const RuleForm = memo(
  RuleFormFields,
  (a, b) =>
    a.kind === b.kind &&
    a.index === b.index &&
    a.rule === b.rule &&
    a.service === b.service &&
    a.readOnly === b.readOnly &&
    a.onEditYaml === b.onEditYaml &&
    sameItems(a.routeIds, b.routeIds) &&
    sameItems(a.classIds, b.classIds) &&
    sameItems(ownItems(a.errors, a), ownItems(b.errors, b)) &&
    sameItems(ownItems(a.warnings ?? [], a), ownItems(b.warnings ?? [], b)),
);

/** ownItems are the errors or flags about p's rule (by index or by id): the ones its form shows. */
function ownItems<T extends { path?: string }>(items: readonly T[], p: Props): T[] {
  if (items.length === 0) return [];
  const byIndex = `${p.kind}[${p.index}]`;
  const byId = `${p.kind}[${String(p.rule.id ?? '')}]`;
  return items.filter((x) => under(x.path, byIndex) || under(x.path, byId));
}

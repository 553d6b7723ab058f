import { Button, Checkbox, Group, List, MultiSelect, NumberInput, Paper, Select, SimpleGrid, Stack, TagsInput, Text, TextInput } from '@mantine/core';
import { useState } from 'react';
import type { FieldError } from '../../api/client';
import { choiceOf, claimsToTags, helpOf, tagsToClaims, tierFields, uncovered, visibleFields, type FieldSpec } from './fields';
import { getIn, newTier, parsePath, setIn, type RuleKind } from './ruleset';
import type { Warning } from '../changes/summary';

type Props = {
  kind: RuleKind;
  index: number;
  rule: Record<string, unknown>;
  routeIds: string[];
  errors: FieldError[];
  /** warnings are the server's risk flags of the whole draft; those of this rule (path "kind[id]…") show at their field. */
  warnings?: Warning[];
  readOnly: boolean;
  onChange: (r: Record<string, unknown>) => void;
  onRemove: () => void;
};

const kindLabel: Record<RuleKind, string> = { routes: 'Route', identities: 'Identity', limits: 'Limit', classes: 'Class', breakers: 'Breaker', degrades: 'Degrade' };

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

/** setKeepingEmpty sets path to "" (where setIn would remove it), so a 'oneof' parent keeps its shape. */
function setKeepingEmpty<T>(rule: T, path: string): T {
  const segs = parsePath(path);
  const leaf = segs.pop()!;
  const parentPath = path.slice(0, path.length - String(leaf).length - 1);
  const parent = getIn(rule, parentPath);
  return setIn(rule, parentPath, { ...(parent && typeof parent === 'object' ? parent : {}), [leaf]: '' });
}

type FieldProps = { kind: RuleKind; f: FieldSpec; helpPath?: string; value: unknown; error?: string; warning?: Warning; readOnly: boolean; routeIds: string[]; onValue: (v: unknown) => void; id: string };

function Field({ kind, f, helpPath, value, error, warning, readOnly, routeIds, onValue, id }: FieldProps) {
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
  const common = { label: f.label, description, error, readOnly, disabled: readOnly, id };
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
      return <Select {...common} data={f.options ?? []} value={(value as string) ?? null} onChange={(v) => onValue(v ?? undefined)} clearable={f.path !== 'algorithm' && f.path !== 'mode'} />;
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
      return <TagsInput {...common} value={(value as string[]) ?? []} onChange={(v) => onValue(v)} />;
    case 'multiselect':
      return <MultiSelect {...common} data={[...new Set([...(f.options ?? []), ...((value as string[]) ?? [])])]} value={(value as string[]) ?? []} onChange={(v) => onValue(v)} />;
    case 'claims':
      return (
        <ClaimsField
          common={{
            ...common,
            description: (
              <>
                {description}
                <span style={{ display: 'block' }}>One name=value per entry (Enter after each).</span>
              </>
            ),
          }}
          value={value}
          onValue={onValue}
        />
      );
    case 'routes':
      return (
        <MultiSelect
          {...common}
          description={common.description ?? 'Empty means every route.'}
          data={[...new Set([...routeIds, ...((value as string[]) ?? [])])]}
          value={(value as string[]) ?? []}
          onChange={(v) => onValue(v)}
          searchable
          limit={50}
        />
      );
    case 'bool':
      return <Checkbox {...common} mt="lg" checked={!!value} onChange={(e) => onValue(e.currentTarget.checked || undefined)} />;
    default:
      return <TextInput {...common} value={value === undefined ? '' : String(value)} onChange={(e) => onValue(e.currentTarget.value)} placeholder={f.placeholder} />;
  }
}

/** ClaimsField edits a name→value map (claims, headers) as "name=value" entries; an entry without "name=" is refused with a message. */
function ClaimsField({ common, value, onValue }: { common: { label: string; description: React.ReactNode; error?: string; readOnly: boolean; disabled: boolean; id: string }; value: unknown; onValue: (v: unknown) => void }) {
  const [bad, setBad] = useState<string[]>([]);
  const local = bad.length > 0 ? `write name=value: ${bad.map((b) => JSON.stringify(b)).join(', ')} has no name` : undefined;
  return (
    <TagsInput
      {...common}
      error={common.error ?? local}
      placeholder="plan=pro"
      value={claimsToTags(value)}
      onChange={(tags) => {
        const r = tagsToClaims(tags);
        setBad(r.bad);
        onValue(Object.keys(r.claims).length > 0 ? r.claims : undefined);
      }}
    />
  );
}

/** show writes a value the form does not edit, short. */
function show(v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 120 ? s.slice(0, 117) + '…' : s;
}

/** RuleForm is the form of one rule; server errors show at their field with the field path. */
export function RuleForm({ kind, index, rule, routeIds, errors, warnings = [], readOnly, onChange, onRemove }: Props) {
  const prefix = `${kind}[${index}]`;
  const id = String(rule.id ?? '');
  const shown = visibleFields(kind, rule);
  const placed = (e: FieldError) => shown.some((f) => under(e.path, `${prefix}.${f.path}`));
  const other = errors.filter((e) => under(e.path, prefix) && !placed(e));
  const extras = uncovered(rule, shown);
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
      onValue={(v) => onChange(f.keepEmpty && v === '' ? setKeepingEmpty(rule, f.path) : setIn(rule, f.path, v))}
    />
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
      <SimpleGrid cols={{ base: 1, sm: 2, lg: 3 }} spacing="sm">
        {shown.filter((f) => f.type !== 'tiers').map(fieldOf)}
      </SimpleGrid>
      {shown.some((f) => f.type === 'tiers') && (
        <Tiers
          kind={kind}
          prefix={prefix}
          ruleId={id}
          rule={rule}
          errors={errors}
          warnings={warnings}
          readOnly={readOnly}
          routeIds={routeIds}
          onChange={(tiers) => onChange(setIn(rule, 'tiers', tiers))}
        />
      )}
      {extras.length > 0 && (
        <Stack gap={2} mt="xs">
          <Text size="xs" c="dimmed" id={`${prefix}-extras`}>
            Also set, not editable in this form (edit in YAML; kept as they are):
          </Text>
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

type TiersProps = {
  kind: RuleKind;
  prefix: string;
  ruleId: string;
  rule: Record<string, unknown>;
  errors: FieldError[];
  warnings: Warning[];
  readOnly: boolean;
  routeIds: string[];
  onChange: (tiers: Record<string, unknown>[] | undefined) => void;
};

/** Tiers edits a limit's tiers: each its own fieldset, in order (the first whose claims match applies). */
function Tiers({ kind, prefix, ruleId, rule, errors, warnings, readOnly, routeIds, onChange }: TiersProps) {
  const tiers = (Array.isArray(rule.tiers) ? rule.tiers : []) as Record<string, unknown>[];
  const help = helpOf(kind, { path: 'tiers', label: 'Tiers', type: 'tiers' });
  const set = (j: number, t: Record<string, unknown> | undefined) => {
    const next = [...tiers];
    if (t === undefined) next.splice(j, 1);
    else next[j] = t;
    onChange(next.length > 0 ? next : undefined);
  };
  const own = errors.filter((e) => e.path === `${prefix}.tiers`);
  return (
    <Stack gap="xs" mt="sm">
      <Group justify="space-between">
        <div>
          <Text fw={600} size="sm">
            Tiers ({tiers.length})
          </Text>
          {help && (
            <Text size="xs" c="dimmed">
              {help}
            </Text>
          )}
        </div>
        {!readOnly && (
          <Button size="xs" variant="default" onClick={() => onChange([...tiers, newTier(rule)])} aria-label={`Add tier to ${ruleId}`}>
            Add tier
          </Button>
        )}
      </Group>
      {own.map((e, i) => (
        <Text key={i} c="red" size="sm" role="alert">
          {e.path}: {e.message}
        </Text>
      ))}
      {tiers.map((t, j) => {
        const tp = `${prefix}.tiers[${j}]`;
        const tid = String(t.id ?? '');
        const placed = (e: FieldError) => tierFields.some((f) => under(e.path, `${tp}.${f.path}`));
        const rest = errors.filter((e) => under(e.path, tp) && !placed(e));
        return (
          <Paper key={j} withBorder p="xs" component="fieldset" aria-label={`Tier ${tid}`} style={{ minWidth: 0 }}>
            <Group justify="space-between" mb={4}>
              <Text size="sm" fw={600} component="legend" px={4}>
                Tier {j + 1}: {tid}
              </Text>
              {!readOnly && (
                <Button variant="subtle" color="red" size="xs" onClick={() => set(j, undefined)} aria-label={`Remove tier ${tid}`}>
                  Remove
                </Button>
              )}
            </Group>
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 3 }} spacing="sm">
              {tierFields.map((f) => (
                <Field
                  key={f.path}
                  id={`${tp}.${f.path}`}
                  kind={kind}
                  f={f}
                  helpPath={`tiers[0].${f.path}`}
                  value={getIn(t, f.path)}
                  error={errorAt(errors, `${tp}.${f.path}`)}
                  warning={warningAt(warnings, [`${kind}[${ruleId}].tiers[${tid}].${f.path}`, `${tp}.${f.path}`])}
                  readOnly={readOnly}
                  routeIds={routeIds}
                  onValue={(v) => set(j, setIn(t, f.path, v))}
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

import { Button, Checkbox, Group, MultiSelect, NumberInput, Paper, Select, SimpleGrid, TagsInput, Text, TextInput } from '@mantine/core';
import type { FieldError } from '../../api/client';
import { fields, helpOf, type FieldSpec } from './fields';
import { getIn, setIn, type RuleKind } from './ruleset';
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

const kindLabel: Record<RuleKind, string> = { routes: 'Route', limits: 'Limit', breakers: 'Breaker', degrades: 'Degrade' };

/** errorAt is the server's message for a field of this rule, with its path. */
function errorAt(errors: FieldError[], prefix: string, f: FieldSpec): string | undefined {
  const want = `${prefix}.${f.path}`;
  const e = errors.find((x) => x.path === want || x.path?.startsWith(want + '.') || x.path?.startsWith(want + '['));
  return e ? `${e.path}: ${e.message}` : undefined;
}

/** warningAt is the risk flag of a field of this rule, by the rule's id (api.Warnings names rules by id). */
function warningAt(warnings: Warning[], kind: RuleKind, ruleId: string, f: FieldSpec): Warning | undefined {
  const want = `${kind}[${ruleId}].${f.path}`;
  return warnings.find((w) => w.path === want || w.path?.startsWith(want + '.') || w.path?.startsWith(want + '['));
}

function Field({ kind, f, value, error, warning, readOnly, routeIds, onValue, id }: { kind: RuleKind; f: FieldSpec; value: unknown; error?: string; warning?: Warning; readOnly: boolean; routeIds: string[]; onValue: (v: unknown) => void; id: string }) {
  const help = helpOf(kind, f);
  const description = warning ? (
    <>
      {help && <span style={{ display: 'block' }}>{help}</span>}
      <Text span size="xs" c="orange.9" fw={600} style={{ display: 'block' }}>
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
    case 'tags':
      return <TagsInput {...common} value={(value as string[]) ?? []} onChange={(v) => onValue(v)} />;
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

/** RuleForm is the form of one rule; server errors show at their field with the field path. */
export function RuleForm({ kind, index, rule, routeIds, errors, warnings = [], readOnly, onChange, onRemove }: Props) {
  const prefix = `${kind}[${index}]`;
  const id = String(rule.id ?? '');
  const other = errors.filter((e) => e.path === prefix || (e.path?.startsWith(prefix + '.') && !fields[kind].some((f) => errorAt([e], prefix, f))));
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
        {fields[kind].map((f) => (
          <Field
            key={f.path}
            id={`${prefix}.${f.path}`}
            kind={kind}
            f={f}
            value={getIn(rule, f.path)}
            error={errorAt(errors, prefix, f)}
            warning={warningAt(warnings, kind, id, f)}
            readOnly={readOnly}
            routeIds={routeIds}
            onValue={(v) => onChange(setIn(rule, f.path, v))}
          />
        ))}
      </SimpleGrid>
      {other.map((e, i) => (
        <Text key={i} c="red" size="sm" mt="xs" role="alert">
          {e.path}: {e.message} (edit it in the YAML view)
        </Text>
      ))}
    </Paper>
  );
}

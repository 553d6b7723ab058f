// The draft editor's collaboration UI: the notice of another save the
// stream announced, and the dialog that asks about the paths both saves
// changed (collab.ts has the logic).
import { Alert, Button, Code, Group, Modal, SegmentedControl, Stack, Table, Text } from '@mantine/core';
import { useEffect, useState } from 'react';
import { ago, type DraftSave, type Reconciled } from './collab';
import { describe, type Side } from './merge3';

/** SaveNotice says another save happened, with its author and age, and offers to reload or compare (merge). */
export function SaveNotice({ save, onReload, onCompare }: { save: DraftSave; onReload: () => void; onCompare: () => void }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 5000);
    return () => clearInterval(t);
  }, []);
  return (
    <Alert color="yellow" title={`${save.actor} saved the draft ${ago(save.at, now)}`}>
      <Text size="sm" mb="xs">
        Your unsaved edits are based on the draft before that save. Compare merges their save into your edits (asking only where you both changed the same field); reload drops your edits.
      </Text>
      <Group>
        <Button size="xs" onClick={onCompare}>
          Compare
        </Button>
        <Button size="xs" variant="default" onClick={onReload}>
          Reload (drop my edits)
        </Button>
      </Group>
    </Alert>
  );
}

const short = (v: unknown) => {
  const s = describe(v);
  return s.length > 160 ? s.slice(0, 157) + '…' : s;
};

/** ConflictDialog lists the paths both saves changed, each with a choice of theirs or mine, and saves the result. */
export function ConflictDialog({
  conflict,
  who,
  saving,
  onLoadTheirs,
  onSave,
  onClose,
}: {
  conflict: Reconciled | null;
  who: string;
  saving: boolean;
  onLoadTheirs: () => void;
  onSave: (choices: Record<string, Side>) => void;
  onClose: () => void;
}) {
  // The choices are about one conflict: a new one starts with none.
  const [picked, setPicked] = useState<{ of: Reconciled | null; choices: Record<string, Side> }>({ of: null, choices: {} });
  const choices = picked.of === conflict ? picked.choices : {};
  const setChoices = (f: (cs: Record<string, Side>) => Record<string, Side>) => setPicked({ of: conflict, choices: f(choices) });
  const conflicts = conflict?.merge.conflicts ?? [];
  const open = conflicts.filter((c) => !choices[c.path]).length;
  return (
    <Modal opened={conflict !== null} onClose={onClose} title="Someone else saved this draft" size="xl">
      {conflict && (
        <Stack>
          <Text>
            {who} saved the draft since you opened it. Their other changes are merged with yours; {conflicts.length === 1 ? 'one field' : `${conflicts.length} fields`} changed on both
            sides: choose, for each, which to keep.
          </Text>
          <Table aria-label="Conflicting fields">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Field</Table.Th>
                <Table.Th>Theirs</Table.Th>
                <Table.Th>Mine</Table.Th>
                <Table.Th>Keep</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {conflicts.map((c) => (
                <Table.Tr key={c.path}>
                  <Table.Td>
                    <Code>{c.path}</Code>
                  </Table.Td>
                  <Table.Td>
                    <Code>{short(c.theirs)}</Code>
                  </Table.Td>
                  <Table.Td>
                    <Code>{short(c.mine)}</Code>
                  </Table.Td>
                  <Table.Td>
                    <SegmentedControl
                      size="xs"
                      aria-label={`Keep for ${c.path}`}
                      value={choices[c.path] ?? ''}
                      onChange={(v) => setChoices((cs) => ({ ...cs, [c.path]: v as Side }))}
                      data={[
                        { value: 'theirs', label: 'Theirs' },
                        { value: 'mine', label: 'Mine' },
                      ]}
                    />
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
          <Group justify="flex-end">
            <Button variant="default" onClick={onLoadTheirs}>
              Load their version (drop my edits)
            </Button>
            <Button onClick={() => onSave(choices)} loading={saving} disabled={open > 0} title={open > 0 ? `Choose for ${open} more field${open > 1 ? 's' : ''}` : undefined}>
              Save merged draft
            </Button>
          </Group>
        </Stack>
      )}
    </Modal>
  );
}

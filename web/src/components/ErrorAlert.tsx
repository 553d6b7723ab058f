import { Alert, List, Text } from '@mantine/core';
import { ApiError, errorMessage } from '../api/client';

/** ErrorAlert shows a refused request: the server's message and every field path it named. */
export function ErrorAlert({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const fields = error instanceof ApiError ? error.fields : [];
  return (
    <Alert color="red" title={title ?? 'Error'} role="alert">
      <Text size="sm" className="pre-wrap">
        {errorMessage(error)}
      </Text>
      {fields.length > 0 && (
        <List size="sm" mt="xs">
          {fields.map((f, i) => (
            <List.Item key={i}>
              <Text span ff="monospace" size="sm">
                {f.path || '(document)'}
                {f.line ? ` (line ${f.line})` : ''}
              </Text>
              : {f.message}
            </List.Item>
          ))}
        </List>
      )}
    </Alert>
  );
}

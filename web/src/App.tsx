import { MantineProvider, Modal, createTheme } from '@mantine/core';
import { QueryClientProvider } from '@tanstack/react-query';
import { RouterProvider } from 'react-router';
import { queryClient } from './api/queryClient';
import { router } from './routes';

// Every dialog's close button has a name, and closing returns the focus to
// what opened it (the dialog must stay mounted while it closes for that).
const theme = createTheme({
  primaryColor: 'blue',
  defaultRadius: 'sm',
  components: { Modal: Modal.extend({ defaultProps: { closeButtonProps: { 'aria-label': 'Close dialog' }, returnFocus: true } }) },
});

export function App() {
  return (
    <MantineProvider theme={theme}>
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </MantineProvider>
  );
}

import { MantineProvider, Modal, createTheme, darken, defaultVariantColorsResolver, parseThemeColor, type CSSVariablesResolver, type VariantColorsResolver } from '@mantine/core';
import { QueryClientProvider } from '@tanstack/react-query';
import { RouterProvider } from 'react-router';
import { queryClient } from './api/queryClient';
import { router } from './routes';

// Light variants (badges, alerts) write their text in a darkened shade 9:
// Mantine's default is 3.8:1 on the light background, under AA's 4.5:1.
const variantColorResolver: VariantColorsResolver = (input) => {
  const r = defaultVariantColorsResolver(input);
  if (input.variant !== 'light') return r;
  const c = parseThemeColor({ color: input.color || input.theme.primaryColor, theme: input.theme });
  return c.isThemeColor && c.color in input.theme.colors ? { ...r, color: darken(input.theme.colors[c.color][9], 0.25) } : r;
};

// Every dialog's close button has a name, and closing returns the focus to
// what opened it (the dialog must stay mounted while it closes for that).
const theme = createTheme({
  variantColorResolver,
  primaryColor: 'blue',
  primaryShade: 8,
  // Filled buttons and badges pick black or white text by their colour's
  // luminance, at the point where either has 4.5:1.
  autoContrast: true,
  luminanceThreshold: 0.179,
  defaultRadius: 'sm',
  components: { Modal: Modal.extend({ defaultProps: { closeButtonProps: { 'aria-label': 'Close dialog' }, returnFocus: true } }) },
});

// Text meets WCAG AA contrast (4.5:1) on white: dimmed text one shade darker
// than Mantine's default (gray 6 is 3.3:1), links in blue 9 (also on a light
// alert's background), filled buttons in shade 8.
const cssVariablesResolver: CSSVariablesResolver = (t) => ({ variables: {}, light: { '--mantine-color-dimmed': t.colors.gray[7], '--mantine-color-anchor': t.colors.blue[9] }, dark: {} });

export function App() {
  return (
    <MantineProvider theme={theme} cssVariablesResolver={cssVariablesResolver}>
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </MantineProvider>
  );
}

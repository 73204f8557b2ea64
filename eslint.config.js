// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const PACKAGE_BOUNDARIES = [
  {
    group: ['@vlt/*/src', '@vlt/*/src/*', '@vlt/*/src/**'],
    message: 'Import another package through its name and public exports, not its src/.',
  },
  {
    group: ['**/libs/**', '**/services/**', '../**/tests/**'],
    message: 'Import other workspace packages by name (@vlt/...), not by relative path.',
  },
];

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/generated/**', '**/dist/**', '.vlt-data/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': ['error', { allow: ['error'] }],
    },
  },
  // Package boundaries: a package is used through its name and its declared exports only.
  {
    files: ['libs/**/*.ts', 'services/**/*.ts', 'tests/**/*.ts', 'bench/**/*.ts', 'clients/*/test/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: PACKAGE_BOUNDARIES }] },
  },
  {
    files: ['libs/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...PACKAGE_BOUNDARIES,
            {
              group: [
                '@vlt/control-plane',
                '@vlt/data-plane',
                '@vlt/audit',
                '@vlt/notifier',
                '@vlt/all-in-one',
              ],
              message: 'Libraries never depend on services.',
            },
          ],
        },
      ],
    },
  },
  // Clients ship to agent machines and speak only the public HTTP API: no server code in them.
  // Their tests may start a real gateway through the test harness.
  {
    files: ['clients/*/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...PACKAGE_BOUNDARIES,
            {
              // @vlt/contracts is the wire format (zod schemas of requests and responses), no server code.
              group: ['@vlt/*', '!@vlt/sdk', '!@vlt/contracts'],
              message:
                'Clients use only the public HTTP API (through @vlt/sdk and @vlt/contracts), never server packages.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['bench/**', 'scripts/**', '**/scripts/**', '**/main.ts', 'tests/**', 'clients/*/test/**'],
    rules: { 'no-console': 'off' },
  },
);

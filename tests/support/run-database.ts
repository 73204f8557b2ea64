import pg from 'pg';

async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Creates an empty database for one test run and applies the migrations to it. */
export async function createRunDatabase(adminUrl: string, name: string) {
  await adminQuery(adminUrl, `CREATE DATABASE "${name}"`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const drop = () => adminQuery(adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  try {
    // Imported here, not at the top: @vlt/db loads the generated client, which exists only
    // after `pnpm db:generate`; say so instead of failing with a bare module-not-found.
    const { applyMigrations } = await import('@vlt/db').catch((error: unknown) => {
      throw new Error(`cannot load @vlt/db (did \`pnpm db:generate\` run?): ${String(error)}`);
    });
    await applyMigrations(url.toString());
  } catch (error) {
    await drop(); // leave no half-made database behind
    throw error;
  }
  return { url: url.toString(), drop };
}

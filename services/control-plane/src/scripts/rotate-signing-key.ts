/**
 * `pnpm signing-key:rotate [overlapSeconds]`: starts signing API JWTs with a new RS256 key.
 * The previous keys stay in the JWKS and keep verifying for the overlap (default 600 s: two
 * JWT lifetimes plus the 60 s in which other replicas pick up the new key), then retire.
 * Needs DATABASE_URL, VLT_MASTER_KEY and PUBLIC_BASE_URL as the control plane has them.
 */
import { parseMasterKeys } from '@vlt/crypto';
import { createPrismaClient } from '@vlt/db';
import { createSigningKeys } from '../infra/signing-keys.js';

async function main(): Promise<void> {
  const { DATABASE_URL, VLT_MASTER_KEY, VLT_MASTER_KEYS_OLD, PUBLIC_BASE_URL } = process.env;
  if (!DATABASE_URL || !VLT_MASTER_KEY || !PUBLIC_BASE_URL) {
    throw new Error('DATABASE_URL, VLT_MASTER_KEY and PUBLIC_BASE_URL are required');
  }
  const overlap = Number(process.argv[2] ?? 600);
  if (!Number.isInteger(overlap) || overlap < 360) {
    throw new Error('overlapSeconds must be an integer of at least 360 (JWT lifetime + replica pick-up)');
  }
  const prisma = createPrismaClient(DATABASE_URL);
  try {
    const keys = await createSigningKeys({
      prisma,
      keyring: parseMasterKeys(VLT_MASTER_KEY, VLT_MASTER_KEYS_OLD),
      issuer: PUBLIC_BASE_URL.replace(/\/+$/, ''),
    });
    const kid = await keys.rotate(overlap);
    console.log(JSON.stringify({ rotated: true, kid, previousKeysRetireInSeconds: overlap }));
  } finally {
    await prisma.$disconnect();
  }
}

main().catch((err: Error) => {
  console.error(`rotation failed: ${err.message}`);
  process.exit(1);
});

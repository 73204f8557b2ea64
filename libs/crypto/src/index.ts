/**
 * @vlt/crypto: envelope encryption of stored credentials, master-key handling, tokens and
 * password hashing. Node's crypto only; nothing runs at import.
 */
export { DecryptionError, MasterKeyError, type DecryptionFailureReason } from './errors.js';
export {
  parseMasterKeys,
  masterKeyId,
  MASTER_KEY_BYTES,
  type MasterKey,
  type MasterKeyring,
} from './keyring.js';
export { loadOrCreateDevMasterKey, DEV_MASTER_KEY_FILE } from './dev-master-key.js';
export { sealJson, openJson, rewrap, needsRewrap, isEnvelope, type Envelope } from './envelope.js';
export { generateToken, hashToken, safeEqual, type TokenPrefix } from './tokens.js';
export { hashPassword, verifyPassword, needsRehash, SCRYPT_PARAMS } from './password.js';

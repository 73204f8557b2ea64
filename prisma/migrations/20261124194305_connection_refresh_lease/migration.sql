-- AlterTable
ALTER TABLE "connections" ADD COLUMN     "credentials_version" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "refresh_lease_until" TIMESTAMPTZ(3);

-- AlterTable
ALTER TABLE "policies" ADD COLUMN     "contact_fields" JSONB;

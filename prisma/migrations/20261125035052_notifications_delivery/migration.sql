-- DropIndex
DROP INDEX "notifications_source_event_id_key";

-- AlterTable
ALTER TABLE "notification_channels" ADD COLUMN     "last_delivery_at" TIMESTAMPTZ(3),
ADD COLUMN     "last_delivery_error" TEXT,
ADD COLUMN     "last_delivery_status" TEXT;

-- AlterTable
ALTER TABLE "notifications" ADD COLUMN     "read_at" TIMESTAMPTZ(3);

-- CreateTable
CREATE TABLE "notification_deliveries" (
    "id" UUID NOT NULL,
    "event_id" TEXT NOT NULL,
    "destination" TEXT NOT NULL,
    "workspace_id" UUID NOT NULL,
    "approval_id" UUID,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "lease_until" TIMESTAMPTZ(3),
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "last_error" TEXT,
    "message_ref" JSONB,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "sent_at" TIMESTAMPTZ(3),

    CONSTRAINT "notification_deliveries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "quick_action_tokens" (
    "id" UUID NOT NULL,
    "approval_id" UUID NOT NULL,
    "action" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "used_at" TIMESTAMPTZ(3),
    "channel_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "quick_action_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "notification_deliveries_approval_id_idx" ON "notification_deliveries"("approval_id");

-- CreateIndex
CREATE UNIQUE INDEX "notification_deliveries_event_id_destination_key" ON "notification_deliveries"("event_id", "destination");

-- CreateIndex
CREATE INDEX "quick_action_tokens_approval_id_idx" ON "quick_action_tokens"("approval_id");

-- CreateIndex
CREATE INDEX "notifications_user_id_created_at_idx" ON "notifications"("user_id", "created_at" DESC);

-- CreateIndex
CREATE UNIQUE INDEX "notifications_source_event_id_user_id_key" ON "notifications"("source_event_id", "user_id");

-- AddForeignKey
ALTER TABLE "quick_action_tokens" ADD CONSTRAINT "quick_action_tokens_approval_id_fkey" FOREIGN KEY ("approval_id") REFERENCES "approval_requests"("id") ON DELETE CASCADE ON UPDATE CASCADE;

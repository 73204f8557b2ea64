-- CreateTable
CREATE TABLE "bus_binding" (
    "id" SMALLINT NOT NULL DEFAULT 1,
    "prefix" TEXT NOT NULL,
    "bound_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "bus_binding_pkey" PRIMARY KEY ("id")
);

-- One row: a database is bound to one bus.
ALTER TABLE "bus_binding" ADD CONSTRAINT "bus_binding_single_row" CHECK ("id" = 1);

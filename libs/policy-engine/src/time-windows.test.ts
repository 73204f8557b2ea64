import type { TimeWindow } from '@vlt/contracts';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ZoneClock, compileTimeWindows, isWithinTimeWindows } from './time-windows.js';

const at = (iso: string) => new Date(iso);
const w = (dayOfWeek: number, startHour: number, endHour: number, timezone: string): TimeWindow => ({
  dayOfWeek,
  startHour,
  endHour,
  timezone,
});

/** Real minutes a schedule is open between two instants, sampled every 15 minutes. */
function openMinutes(windows: TimeWindow[], fromIso: string, toIso: string): number {
  const schedule = compileTimeWindows(windows);
  let open = 0;
  for (let t = Date.parse(fromIso); t < Date.parse(toIso); t += 15 * 60_000)
    if (schedule.isOpen(new Date(t))) open += 15;
  return open;
}

describe('isWithinTimeWindows', () => {
  it('is always open with no windows, and never with an invalid date and windows', () => {
    expect(isWithinTimeWindows([], at('2024-01-01T00:00:00Z'))).toBe(true);
    expect(isWithinTimeWindows([w(1, 0, 23, 'UTC')], new Date(Number.NaN))).toBe(false);
  });

  it('treats both hours as inclusive', () => {
    const mon9to17 = [w(1, 9, 17, 'UTC')];
    expect(isWithinTimeWindows(mon9to17, at('2024-01-01T08:59:59Z'))).toBe(false);
    expect(isWithinTimeWindows(mon9to17, at('2024-01-01T09:00:00Z'))).toBe(true);
    expect(isWithinTimeWindows(mon9to17, at('2024-01-01T17:59:59Z'))).toBe(true);
    expect(isWithinTimeWindows(mon9to17, at('2024-01-01T18:00:00Z'))).toBe(false);
    expect(isWithinTimeWindows(mon9to17, at('2024-01-02T12:00:00Z'))).toBe(false);
  });

  it('uses the window time zone for both day and hour', () => {
    // 2024-01-01T23:30Z is Tuesday 00:30 in Berlin and Monday 18:30 in New York.
    const t = at('2024-01-01T23:30:00Z');
    expect(isWithinTimeWindows([w(2, 0, 0, 'Europe/Berlin')], t)).toBe(true);
    expect(isWithinTimeWindows([w(1, 0, 0, 'Europe/Berlin')], t)).toBe(false);
    expect(isWithinTimeWindows([w(1, 18, 18, 'America/New_York')], t)).toBe(true);
  });

  it('handles windows that cross midnight, including Saturday into Sunday', () => {
    const friNight = [w(5, 22, 2, 'Europe/Berlin')]; // Friday 22:00 to Saturday 02:59 Berlin (CET, UTC+1)
    expect(isWithinTimeWindows(friNight, at('2024-01-05T20:59:00Z'))).toBe(false);
    expect(isWithinTimeWindows(friNight, at('2024-01-05T21:00:00Z'))).toBe(true);
    expect(isWithinTimeWindows(friNight, at('2024-01-06T01:59:00Z'))).toBe(true);
    expect(isWithinTimeWindows(friNight, at('2024-01-06T02:00:00Z'))).toBe(false);
    expect(isWithinTimeWindows(friNight, at('2024-01-06T21:30:00Z'))).toBe(false); // Saturday 22:30 is not Friday
    expect(isWithinTimeWindows(friNight, at('2024-01-04T23:30:00Z'))).toBe(false); // Friday 00:30 is not the morning part
    const satNight = [w(6, 23, 0, 'UTC')];
    expect(isWithinTimeWindows(satNight, at('2024-01-07T00:30:00Z'))).toBe(true);
    expect(isWithinTimeWindows(satNight, at('2024-01-01T00:30:00Z'))).toBe(false);
  });

  it('opens when any window is open', () => {
    const ws = [w(1, 9, 9, 'UTC'), w(1, 11, 11, 'UTC')];
    expect(isWithinTimeWindows(ws, at('2024-01-01T09:30:00Z'))).toBe(true);
    expect(isWithinTimeWindows(ws, at('2024-01-01T10:30:00Z'))).toBe(false);
    expect(isWithinTimeWindows(ws, at('2024-01-01T11:30:00Z'))).toBe(true);
  });
});

describe('time windows across daylight-saving changes', () => {
  it('keeps wall-clock hours in New York when DST starts (2024-03-10)', () => {
    const sun9to17 = [w(0, 9, 17, 'America/New_York')];
    // Before the change 09:00 is 14:00Z, after it 13:00Z.
    expect(isWithinTimeWindows(sun9to17, at('2024-03-03T13:30:00Z'))).toBe(false);
    expect(isWithinTimeWindows(sun9to17, at('2024-03-03T14:00:00Z'))).toBe(true);
    expect(isWithinTimeWindows(sun9to17, at('2024-03-10T13:00:00Z'))).toBe(true);
    expect(isWithinTimeWindows(sun9to17, at('2024-03-10T12:59:00Z'))).toBe(false);
    expect(openMinutes(sun9to17, '2024-03-10T00:00:00Z', '2024-03-11T12:00:00Z')).toBe(9 * 60);
  });

  it('never opens a window on the hour that New York skips, and opens twice on the repeated one', () => {
    expect(
      openMinutes([w(0, 2, 2, 'America/New_York')], '2024-03-10T00:00:00Z', '2024-03-11T12:00:00Z'),
    ).toBe(0);
    expect(
      openMinutes([w(0, 1, 1, 'America/New_York')], '2024-11-03T00:00:00Z', '2024-11-04T12:00:00Z'),
    ).toBe(120);
    // 01:00-01:59 happens at 05:00Z (EDT) and again at 06:00Z (EST).
    expect(isWithinTimeWindows([w(0, 1, 1, 'America/New_York')], at('2024-11-03T05:30:00Z'))).toBe(true);
    expect(isWithinTimeWindows([w(0, 1, 1, 'America/New_York')], at('2024-11-03T06:30:00Z'))).toBe(true);
    expect(isWithinTimeWindows([w(0, 1, 1, 'America/New_York')], at('2024-11-03T07:30:00Z'))).toBe(false);
  });

  it('does the same in Berlin (2024-03-31 and 2024-10-27)', () => {
    expect(openMinutes([w(0, 2, 2, 'Europe/Berlin')], '2024-03-30T12:00:00Z', '2024-04-01T00:00:00Z')).toBe(
      0,
    );
    expect(openMinutes([w(0, 2, 2, 'Europe/Berlin')], '2024-10-26T12:00:00Z', '2024-10-28T00:00:00Z')).toBe(
      120,
    );
    const sun9to17 = [w(0, 9, 17, 'Europe/Berlin')];
    expect(isWithinTimeWindows(sun9to17, at('2024-03-24T08:00:00Z'))).toBe(true); // 09:00 CET
    expect(isWithinTimeWindows(sun9to17, at('2024-03-31T07:00:00Z'))).toBe(true); // 09:00 CEST
    expect(isWithinTimeWindows(sun9to17, at('2024-03-31T06:59:00Z'))).toBe(false);
  });

  it('shortens and lengthens a window that crosses midnight and a DST change', () => {
    // Saturday 22:00 to Sunday 03:59: six wall-clock hours, five real ones in spring, seven in autumn.
    const satNight = [w(6, 22, 3, 'Europe/Berlin')];
    expect(openMinutes(satNight, '2024-03-16T12:00:00Z', '2024-03-17T12:00:00Z')).toBe(6 * 60);
    expect(openMinutes(satNight, '2024-03-30T12:00:00Z', '2024-03-31T12:00:00Z')).toBe(5 * 60);
    expect(openMinutes(satNight, '2024-10-26T12:00:00Z', '2024-10-27T12:00:00Z')).toBe(7 * 60);
  });

  it('follows the southern hemisphere too (Sydney, DST ends 2024-04-07)', () => {
    expect(
      openMinutes([w(0, 2, 2, 'Australia/Sydney')], '2024-04-06T00:00:00Z', '2024-04-07T12:00:00Z'),
    ).toBe(120);
    expect(
      openMinutes([w(0, 2, 2, 'Australia/Sydney')], '2024-10-05T00:00:00Z', '2024-10-06T12:00:00Z'),
    ).toBe(0);
  });
});

describe('ZoneClock memo', () => {
  it('gives the same local day and hour as a fresh formatter for any sequence of instants', () => {
    const zones = [
      'America/New_York',
      'Europe/Berlin',
      'Asia/Kathmandu',
      'Australia/Lord_Howe',
      'Pacific/Chatham',
      'UTC',
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...zones),
        fc.array(
          fc.integer({ min: Date.parse('2020-01-01T00:00:00Z'), max: Date.parse('2030-01-01T00:00:00Z') }),
          { minLength: 1, maxLength: 30 },
        ),
        (zone, instants) => {
          const memo = new ZoneClock(zone);
          for (const t of instants.flatMap((x) => [x, x + 60_000, x + 14 * 60_000])) {
            expect(memo.local(new Date(t))).toEqual(new ZoneClock(zone).local(new Date(t)));
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

import { describe, expect, it } from 'vitest';
import { BodyBudget } from './body-budget.js';

describe('BodyBudget', () => {
  it('reserves up to its capacity and refuses what would go over it', () => {
    const budget = new BodyBudget(100);
    const a = budget.tryReserve(60);
    expect(a).not.toBeNull();
    expect(budget.tryReserve(41)).toBeNull();
    expect(budget.tryReserve(40)).not.toBeNull();
    expect(budget.inUse).toBe(100);
    expect(budget.tryReserve(1)).toBeNull();
  });

  it('a release gives its bytes back once, however often it is called', () => {
    const budget = new BodyBudget(100);
    const a = budget.tryReserve(70)!;
    const b = budget.tryReserve(30)!;
    a();
    a();
    expect(budget.inUse).toBe(30);
    expect(budget.tryReserve(71)).toBeNull();
    expect(budget.tryReserve(70)).not.toBeNull();
    b();
    expect(budget.inUse).toBe(70);
  });
});

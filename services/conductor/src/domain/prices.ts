/** What a paid tool call costs, priced from the gateway's published cost table (`GET /api/v1/credits/costs`). */
export interface Priced {
  /** The ledger operation, named as the gateway names the same operation bought through its proxy. */
  operation: string;
  amount: number;
}

/** A call whose operation the gateway does not publish a price for: it is refused, never guessed. */
export class UnpricedOperation extends Error {
  override name = 'UnpricedOperation';
}

export class PriceBook {
  private readonly costs: ReadonlyMap<string, number>;

  constructor(costs: ReadonlyMap<string, number>) {
    this.costs = costs;
  }

  cost(operation: string): number {
    const cost = this.costs.get(operation);
    if (cost === undefined) throw new UnpricedOperation(`the gateway publishes no price for ${operation}`);
    return cost;
  }

  /** A scene: the preset's price, plus the image surcharge when it comes with an image (as the gateway's proxy prices it). */
  scene(preset: string, image: boolean): Priced {
    const amount = this.cost(`generation.${preset}`) + (image ? this.cost('generation.image') : 0);
    return { operation: `generation.${preset}${image ? '+image' : ''}`, amount };
  }

  simulation(fidelity: number): Priced {
    const operation = `simulation.fidelity-${fidelity}`;
    return { operation, amount: this.cost(operation) };
  }
}

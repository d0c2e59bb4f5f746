import { eraOf, MONTHS } from '@tempora/kit/moments';

/** Where a moment happened: few distinct places, so each is one shared object however many moments it holds. */
interface Place {
  country: string;
  region: string;
  city: string;
}

/** What a traversal or path node shows that its path does not already say. */
export interface NodeFields {
  id: number;
  path: string;
  name: string;
  type: string;
  layer: number;
  status: string;
  latitude: number | null;
  longitude: number | null;
  confidence: number;
}

/**
 * The public moments' node fields in memory, by id and by path, built with the adjacency index and kept
 * current with it: traversals and paths resolve their anchor and render their nodes without a database
 * round trip. Numbers live in typed arrays; year, date and place are taken from the path when a moment
 * is stored (a view used to split its path each time: at a million moments a fifth of a traversal's time).
 */
export class NodeStore {
  private paths: Array<string | undefined> = [];
  private names: Array<string | undefined> = [];
  private types: Array<string | undefined> = [];
  private statuses: Array<string | undefined> = [];
  private places: Array<Place | undefined> = [];
  private years = new Int32Array(0);
  /** Month number × 32 + day. */
  private dates = new Uint16Array(0);
  private layers = new Uint8Array(0);
  private coordinates = new Float64Array(0);
  private confidences = new Float64Array(0);
  private readonly byPath = new Map<string, number>();
  /** One copy of each type and status string, however many moments share it. */
  private readonly interned = new Map<string, string>();
  private readonly internedPlaces = new Map<string, Place>();
  private textBytes = 0;

  private intern(value: string): string {
    const known = this.interned.get(value);
    if (known !== undefined) return known;
    this.interned.set(value, value);
    return value;
  }

  get size(): number {
    return this.byPath.size;
  }

  private ensure(id: number): void {
    if (id < this.layers.length) return;
    const capacity = Math.max(id + 1, Math.ceil(this.layers.length * 1.5), 1024);
    const grow = <T extends Uint8Array | Uint16Array | Int32Array | Float64Array>(old: T, make: (n: number) => T): T => {
      const next = make(capacity);
      next.set(old);
      return next;
    };
    this.layers = grow(this.layers, (n) => new Uint8Array(n));
    this.years = grow(this.years, (n) => new Int32Array(n));
    this.dates = grow(this.dates, (n) => new Uint16Array(n));
    this.coordinates = grow(this.coordinates, (n) => new Float64Array(n * 2));
    this.confidences = grow(this.confidences, (n) => new Float64Array(n));
  }

  set(node: NodeFields): void {
    this.remove(node.id);
    this.ensure(node.id);
    this.paths[node.id] = node.path;
    this.names[node.id] = node.name;
    this.types[node.id] = this.intern(node.type);
    this.statuses[node.id] = this.intern(node.status);
    // Year, date and place are read back from the path once here, not on every view.
    const [, year, month, day, , country, region, city] = node.path.split('/') as [string, string, string, string, string, string, string, string];
    const placeKey = `${country}/${region}/${city}`;
    let place = this.internedPlaces.get(placeKey);
    if (!place) this.internedPlaces.set(placeKey, (place = { country, region, city }));
    this.places[node.id] = place;
    this.years[node.id] = Number(year);
    this.dates[node.id] = (MONTHS.indexOf(month as (typeof MONTHS)[number]) + 1) * 32 + Number(day);
    this.textBytes += 2 * (node.path.length + node.name.length) + 64;
    this.layers[node.id] = node.layer;
    this.coordinates[node.id * 2] = node.latitude ?? Number.NaN;
    this.coordinates[node.id * 2 + 1] = node.longitude ?? Number.NaN;
    this.confidences[node.id] = node.confidence;
    this.byPath.set(node.path, node.id);
  }

  /** Forgets a moment that was deleted or made private. */
  remove(id: number): void {
    const path = this.paths[id];
    if (path === undefined) return;
    this.byPath.delete(path);
    this.textBytes -= 2 * (path.length + (this.names[id]?.length ?? 0)) + 64;
    this.paths[id] = this.names[id] = this.types[id] = this.statuses[id] = this.places[id] = undefined;
  }

  idOf(path: string): number | undefined {
    return this.byPath.get(path);
  }

  has(id: number): boolean {
    return this.paths[id] !== undefined;
  }

  /** The node view of a stored moment (the same shape `nodeView` gives a database row). */
  view(id: number, hop: number) {
    const place = this.places[id]!;
    const year = this.years[id]!;
    const date = this.dates[id]!;
    const latitude = this.coordinates[id * 2]!;
    const longitude = this.coordinates[id * 2 + 1]!;
    return {
      id: this.paths[id]!,
      name: this.names[id]!,
      year,
      month_num: date >> 5,
      day: date & 31,
      era: eraOf(year),
      type: this.types[id]!,
      layer: this.layers[id]!,
      country: place.country,
      region: place.region,
      city: place.city,
      latitude: Number.isNaN(latitude) ? null : latitude,
      longitude: Number.isNaN(longitude) ? null : longitude,
      confidence: this.confidences[id]!,
      status: this.statuses[id]!,
      hop,
    };
  }

  /** Bytes held: typed arrays exactly; strings, array slots and map entries estimated. */
  get memoryBytes(): number {
    return (
      this.layers.byteLength +
      this.years.byteLength +
      this.dates.byteLength +
      this.coordinates.byteLength +
      this.confidences.byteLength +
      this.paths.length * 40 +
      this.internedPlaces.size * 120 +
      this.textBytes
    );
  }
}
